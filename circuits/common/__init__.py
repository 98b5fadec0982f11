"""The base layer every other part of ``circuits`` imports: frozen configs and their command-line options, limits on
sizes, argument checks, paths, reading files a stranger wrote, metrics and devices. Imports nothing of the package."""
