"""PNG figures (matplotlib object API, no display): the only part of ``analysis`` that imports matplotlib.

May import every layer below it, reporting included (histogram bins, shared labels). Map: analysis/README.md.
"""
