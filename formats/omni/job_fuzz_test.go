package omni

import (
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParseJob: a job file is whatever the user passes to assimilate. No
// panic; an error returns nil; a parsed job is valid and survives a YAML
// round trip unchanged.
func FuzzParseJob(f *testing.F) {
	f.Add([]byte("name: climate\ntransfers:\n  - src: file::/lustre/proj/run1.h5\n    dst: iowarp::run1\n" +
		"    format: hdf5\n    range_off: 0\n    range_size: 0\n    dataset_filter: /temperature\n"))
	f.Add([]byte("name: a\ntransfers:\n  - src: /x.nc\n  - src: file:///y.h5\n    depends_on: x\n"))
	f.Add([]byte("name: a\ntransfers:\n  - src: s3://bucket/x\n"))
	f.Add([]byte("name: a\ntransfers: []\n"))
	f.Add([]byte("name: a\ntransfers:\n  - src: /x\n    range_off: -1\n"))
	f.Add([]byte("name: &a a\nextra: *a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := ParseJob(b)
		if err != nil {
			if j != nil {
				t.Fatalf("error %v with a job", err)
			}
			return
		}
		if j.Name == "" || len(j.Transfers) == 0 {
			t.Fatalf("invalid job accepted: %+v", j)
		}
		for _, tr := range j.Transfers {
			if _, err := tr.SrcPath(); err != nil || tr.RangeOff < 0 || tr.RangeSize < 0 {
				t.Fatalf("invalid transfer accepted: %+v (%v)", tr, err)
			}
			_ = tr.DstName()
		}
		out, err := yaml.Marshal(j)
		if err != nil {
			t.Fatalf("job does not marshal: %v", err)
		}
		j2, err := ParseJob(out)
		if err != nil {
			t.Fatalf("marshalled job %q does not parse: %v", out, err)
		}
		if !reflect.DeepEqual(j, j2) {
			t.Fatalf("round trip changed the job:\n%+v\n%+v", j, j2)
		}
	})
}
