"""Interactive views as offline HTML, from plain numbers: CircuitsVis's attention explorer with its JavaScript
inlined (explorer.py), the formation movie's page (movie_page.py, its curves in charts.py, its few lines of
JavaScript in movie.js). Nothing here loads a run or a model: the report layer gathers the numbers."""
