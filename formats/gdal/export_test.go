package gdal

// WarmUp: see warmUp.
var WarmUp = warmUp
