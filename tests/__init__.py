"""The tests, by area: library/ (one file per module of src/attention_lab), course/ (the
notebooks, their prose, translations, slides and pages, in a browser too), build/ (the tools,
the install and the pins) and hub/ (the classroom hub, `make test-hub`). Shared fixtures and
helpers sit here: conftest.py, browser_helpers.py, hub_helpers.py.
"""
