package ebpf

// The BPF program is compiled by clang into trace_bpfel.o and wrapped by
// bpf2go into trace_bpfel.go; both are committed, so building iowarp needs
// no clang (TestGeneratedUpToDate recompiles and compares where clang is).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall" -target bpfel -type event -type path_event -type agg_event -type blkio -type config trace bpf/trace.c -- -I/usr/include/x86_64-linux-gnu
//go:generate sh -c "sha256sum bpf/trace.c > trace_bpfel.sha256"
