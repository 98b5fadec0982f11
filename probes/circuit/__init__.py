"""The circuit edge by edge: path patching of every edge (:mod:`.path_patching`) and what it says (:mod:`.edges`)."""
