"""The Simplified Chinese edition's tooling, by role; ``python -m tools.translations`` is its
command line.

    common    names, paths, catalogues (polib), TranslationError, read_notebook
    extract   the translatable strings of a notebook: markdown cells, prose code comments
    merge     `update`: strings merged into i18n/zh_CN/<stem>.po as msgmerge does (fuzzy)
    build     `build`: notebooks/zh-CN/<name>.ipynb from the English and its catalogue
    check     `check`: the edition is exactly what `update` + `build` would give
    glossary  `glossary-check`: i18n/glossary.tsv's terms in the Chinese prose

Import it as ``tools.catalogues`` from the repository root; notebooks are read and written with
tools/notebook_io.py. Three names, three things: this package is the code, the repository's
i18n/ folder holds the catalogues, and ``attention_lab.i18n`` is the library's language switch.
"""
