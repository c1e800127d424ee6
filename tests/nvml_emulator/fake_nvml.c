/* An emulated libnvidia-ml.so.1 with a known power model, for the --gpu-metrics nvml tests (no GPU, no driver).
 *
 * Only what pynvml calls for contract.nvml: init and shutdown, the device count and handles, the five getters and
 * the error strings. Configured by the environment of the process that loads it:
 *   FAKE_NVML_WATTS=300,150        one GPU per value, each drawing that constant power (W);
 *   FAKE_NVML_UNSUPPORTED=energy   getters that answer NVML_ERROR_NOT_SUPPORTED (energy, power, util, memory, clock);
 *   FAKE_NVML_INIT_ERROR=9         nvmlInit fails with that code (9: driver not loaded).
 * GPU i's energy counter is 4e9 + 1e9 * i mJ plus its watts times CLOCK_MONOTONIC seconds: one system-wide clock,
 * so every process that loads the library reads the same counter, and the test knows the joules of any window.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OK 0
#define ERR_INVALID_ARGUMENT 2
#define ERR_NOT_SUPPORTED 3
#define MAX_GPUS 16

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef void *nvmlDevice_t;

static double watts[MAX_GPUS];
static unsigned int gpus;

static int unsupported(const char *field) {
    const char *list = getenv("FAKE_NVML_UNSUPPORTED");
    return list != NULL && strstr(list, field) != NULL;
}

static int init(void) {
    const char *fail = getenv("FAKE_NVML_INIT_ERROR");
    if (fail != NULL && *fail)
        return atoi(fail);
    const char *spec = getenv("FAKE_NVML_WATTS");
    gpus = 0;
    for (const char *p = spec ? spec : "300"; *p && gpus < MAX_GPUS;) {
        char *end;
        watts[gpus++] = strtod(p, &end);
        p = *end == ',' ? end + 1 : end + strlen(end);
    }
    return OK;
}

int nvmlInitWithFlags(unsigned int flags) { (void)flags; return init(); }
int nvmlInit_v2(void) { return init(); }
int nvmlShutdown(void) { return OK; }

const char *nvmlErrorString(int result) {
    switch (result) {
    case OK: return "Success";
    case ERR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERR_NOT_SUPPORTED: return "Not Supported";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

int nvmlDeviceGetCount_v2(unsigned int *count) { *count = gpus; return OK; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (index >= gpus)
        return ERR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(uintptr_t)(index + 1);
    return OK;
}

static int gpu_of(nvmlDevice_t device) { return (int)((uintptr_t)device - 1); }

int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *mj) {
    if (unsupported("energy"))
        return ERR_NOT_SUPPORTED;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double seconds = (double)now.tv_sec + now.tv_nsec / 1e9;
    int i = gpu_of(device);
    *mj = 4000000000ULL + 1000000000ULL * (unsigned long long)i + (unsigned long long)(watts[i] * 1000.0 * seconds);
    return OK;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *mw) {
    if (unsupported("power"))
        return ERR_NOT_SUPPORTED;
    *mw = (unsigned int)(watts[gpu_of(device)] * 1000.0 + 0.5);
    return OK;
}

int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    (void)device;
    if (unsupported("util"))
        return ERR_NOT_SUPPORTED;
    util->gpu = 87;
    util->memory = 40;
    return OK;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    if (unsupported("memory"))
        return ERR_NOT_SUPPORTED;
    memory->total = 80ULL << 30;
    memory->used = (unsigned long long)(gpu_of(device) + 1) << 30;  /* GPU i: i + 1 GiB */
    memory->free = memory->total - memory->used;
    return OK;
}

int nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *mhz) {
    (void)device;
    if (unsupported("clock") || type != 1)  /* NVML_CLOCK_SM */
        return ERR_NOT_SUPPORTED;
    *mhz = 1980;
    return OK;
}
