// Package search is the search across datasets (the seed's Context
// Exploration Engine): every variable of every dataset the daemon has seen
// (assimilated, or opened under /.omni) is a document of an inverted index
// over its name, long_name, standard_name, units, other attributes and
// its dataset's name and global attributes, ranked by BM25 (k1 1.2,
// b 0.75) with per-field weights (BM25F-style: a term's frequency is the
// weighted sum over the fields it occurs in). Coordinate filters
// (`lat=-10:10,time=2024-01-01:2024-06-30`) are answered from each
// dataset's coordinate values, kept in the index: a variable matches when
// an axis answers to the filter's name (the dimension's name or the CF
// role of its coordinate, as views resolve them, omni.AxisMatches) and at
// least one coordinate value lies in the range (for coordinates of more
// than MaxCoordValues values, when the range meets [min, max]); longitudes
// compare modulo 360 and a range lo > hi wraps (350:10).
//
// Why an index of our own and not bleve or SQLite FTS5: the corpus is
// small (variables and their metadata, not data), the ranking needed is
// plain BM25 over a handful of fields, and both libraries are large
// dependencies (bleve pulls in dozens of modules; FTS5 needs cgo in a
// package that must not call C). The index here is a map of postings
// rebuilt from the documents at load; only the documents are persisted.
//
// Bounds: at most Options.MaxVariables documents, MaxDatasets datasets
// and MaxBytes of documents (an estimate, about the size of the file; the
// least recently indexed datasets are dropped first, and a dataset larger
// than MaxBytes alone keeps its coordinates' min and max only, then loses
// its last variables), at most maxFieldBytes of text per field and
// maxAttrText of attribute text per variable, MaxCoordValues values per
// coordinate. The file holds the
// documents as JSON, written through a temporary file and rename (mode
// 0600), so a crash leaves the old or the new index; a file that does not
// decode is an error at Open and the index starts empty (it is a cache
// of what the datasets say, rebuilt as they are seen again).
//
// Index is safe for concurrent use (one RWMutex: searches share it,
// updates take it alone).
package search
