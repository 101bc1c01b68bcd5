"""The notebook layer: magics, settings, the cell view and the live context-meter widget (the
meter itself, its data and its renderings, is `evo_magic.meter`).

The only part of evo_magic that imports IPython or ipywidgets; the core never imports it.
"""
