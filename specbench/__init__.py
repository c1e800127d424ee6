"""specbench."""
