"""The course as a book: book.toml (:mod:`.config`), the HTML site (:mod:`.build`),
editions (:mod:`.editions`), single-notebook export (:mod:`.export`).

Needs the ``book`` extra (Sphinx, myst-nb, sphinx-book-theme, nbclient, nbconvert,
jupyter-cache); :mod:`.config` alone needs only ``tomli`` on Python < 3.11.
"""
