"""The report's build room: which sections to make again, the processes they are made in,
what is kept between builds, and the one writer of every file.

- `inputs`: a hash of everything a section's output is made from (its runs' files, its code,
  the analysis base, its data files, the library versions); a section whose hash is unchanged
  is not made again.
- `runner`: makes the stale sections (in worker processes when there are several:
  `workers`), reading the traces' database (`database_cache`), and keeps their outputs
  (`store`).
- `writer`: writes the files of every section and the composed documents, only those whose
  bytes differ, and removes figures no section gives any more; it records what it wrote, so
  that `make report` can tell that reports/ is current without starting a kernel (`stamp`).
"""
