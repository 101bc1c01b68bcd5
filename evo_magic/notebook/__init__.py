"""The notebook layer: magics, settings, the cell view and the context meter.

The only part of evo_magic that imports IPython or ipywidgets; the core never imports it.
"""
