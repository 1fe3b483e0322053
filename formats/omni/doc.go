// Package omni is the OMNI data model of iowarp: a Dataset is a tree of
// Groups holding Variables (typed N-D arrays with named dimensions,
// chunking and attributes) and Dimensions (size, unlimited flag,
// coordinate variable). Every format (HDF5, NetCDF, Zarr, CSV, JSON lines,
// Parquet) is seen through this model.
//
// What this package owns:
//
//   - the model and its JSON form (schema.json: Dataset.Schema, DecodeSchema);
//   - CF conventions (units, standard_name, calendar, "days since ..." time
//     coordinates) and NeXus NX_class groups;
//   - selections: Hyperslab (start, count, stride) and coordinate-range
//     selection (values, or dates through CF time units, to index ranges
//     on monotonic coordinate variables);
//   - the view-path syntax of the `.omni/` views, `temperature[0:2,10:20,:]`
//     and `temperature@time=2024-01-01:2024-06-30,lat=-10:10` (ParseView);
//   - renderings of raw variable bytes: the NumPy 1.0 header (NPYHeader)
//     and CSV (CSVTable, with coordinate columns);
//   - CF decoding as xarray's default (Decoding: masks, scale/offset, CF
//     time to Datetime64);
//   - the escaping of stored names into path components (EscapeName),
//     applied once by OpenFile, and the on-demand variables of omitted
//     attribute values (AttrVar);
//   - the registry of format drivers (Register, OpenFile, WriterFor) and of
//     assimilated datasets (Registry), and the upstream OMNI job YAML (ParseJob).
//
// Raw data is always C order, native (little-endian) byte order, one element
// after the other; DType.Size gives the element size. Variable-length
// strings (DType "string") are encoded element by element as a 4-byte
// little-endian length followed by the bytes (see EncodeStrings).
//
// This package never calls C: format drivers that do (formats/hdf5,
// formats/netcdf) register themselves, and the daemon runs them only in
// helper processes (formats/helper), never in its own address space.
//
// Types in this package are plain values: a Dataset is safe for concurrent
// reads once built; nothing here locks.
package omni
