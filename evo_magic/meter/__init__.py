"""The context meter, without IPython: what happened to a session's context and its renderings.

- `log`: the log of a session's calls and compactions (`MeterLog`, `follow`, `Scope`);
- `data`: what one meter shows (`MeterData`, a log through a scope at one moment);
- `composition`: what a context holds by kind;
- `chart`: the context chart in the data's own units; `figure`: that chart as a matplotlib
  figure (matplotlib imported only when a figure is made);
- `words`, `text`, `state`, `chart_html`, `html`: the meter in words, as plain text, as the
  widget's synced state, and as self-contained HTML (the chart drawn in positioned `div`s).

The notebook's live widget (`evo_magic.notebook.widget`) draws these. Nothing is imported here,
so importing one module loads only what it needs.
"""
