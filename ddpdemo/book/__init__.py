"""The book's build and translation tooling (maintainers, CI): re-running
the notebooks (execute), the translations (i18n, cut into units by
i18n_units), the Chinese site (zh_book), the two Sphinx extensions
both sites load: the language switch (langswitch) and light pages
(lightpages: formulas as MathML, the theme's icons from cut-down fonts),
and the Chinese site's own: its search (zhsearch) and its interactive
figures in Chinese (zhfigures), with static/ and templates/; and the
benchmark behind the book's speed claims (bench).

    python -m ddpdemo.book.execute [NOTEBOOK...]   # store outputs
    python -m ddpdemo.book stale|accept|build|...   # the translations
    python -m ddpdemo.book.bench [--no-book]        # the measurements

What it may import: the standard library and the book extra of
pyproject.toml (`pip install ddpdemo[book]`: pyyaml, nbformat, nbclient,
latex2mathml, fonttools, sphinx and its themes through jupyter-book).
Nothing of ddpdemo outside this
folder, but in bench: the book's notebooks import ddpdemo in their own
kernels, not here. bench measures the runtime and the lessons, so it
alone imports them (Cluster, the scripts' runner, bandwidth). Nothing
of ddpdemo imports this folder, so the runtime and the lessons work
without the extra.

This file imports nothing, so that Sphinx loading
ddpdemo.book.langswitch loads nothing else.
"""
