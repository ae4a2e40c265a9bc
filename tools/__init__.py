"""The course's build tools: running, translating and slicing the notebooks, the slides, the
summary sheet, the assignment, the hub's venv. Not part of the library (nothing in
src/attention_lab imports them). Run each from the repository root as a module:
``python -m tools.run_notebooks``, ``python -m tools.translations check``.
"""
