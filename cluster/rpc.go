package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
)

// frame is every message of the service: bytes, as the codec moves them.
type frame struct{ b []byte }

// frameCodec is the "iowarp-frame" codec: a frame's bytes are the
// message (no protobuf).
type frameCodec struct{}

const codecName = "iowarp-frame"

func (frameCodec) Name() string { return codecName }

func (frameCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("cluster codec: cannot marshal %T", v)
	}
	return f.b, nil
}

func (frameCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("cluster codec: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

func init() { encoding.RegisterCodec(frameCodec{}) }

const serviceName = "iowarp.cluster.Node"

// pageRequest asks for page Page (of PageSize bytes) of Path.
type pageRequest struct {
	Path     string `json:"path"`
	Page     int64  `json:"page"`
	PageSize int64  `json:"page_size"`
}

// revokeRequest asks the owner of Path to write it back and let it go.
type revokeRequest struct {
	Path string `json:"path"`
}

// PingReply is a member's answer to Health.
type PingReply struct {
	Name       string `json:"name"`
	OwnedFiles int    `json:"owned_files"`
}

// maxPage bounds the page a request may ask for (and so a reply).
const maxPage = 64 << 20

type method func(n *Node, ctx context.Context, req []byte) ([]byte, error)

func handler(name string, fn method) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(frame)
		if err := dec(in); err != nil {
			return nil, err
		}
		out, err := fn(srv.(*Node), ctx, in.b)
		if err != nil {
			return nil, err
		}
		return &frame{b: out}, nil
	}}
}

// nodeService is the HandlerType of the service: *Node.
type nodeService interface{ serviceName() string }

func (n *Node) serviceName() string { return serviceName }

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*nodeService)(nil),
	Methods: []grpc.MethodDesc{
		handler("ReadPage", (*Node).serveReadPage),
		handler("Revoke", (*Node).serveRevoke),
		handler("Ping", (*Node).servePing),
		handler("BlobPut", (*Node).serveBlobPut),
		handler("BlobGet", (*Node).serveBlobGet),
	},
	Metadata: "cluster/rpc.go",
}

// decodeRequest parses a JSON request; bad bytes are InvalidArgument.
func decodeRequest(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return status.Errorf(codes.InvalidArgument, "bad request: %v", err)
	}
	return nil
}

// call sends req (JSON) to method on conn and returns the reply's bytes.
func call(ctx context.Context, conn *grpc.ClientConn, method string, req any) ([]byte, error) {
	return callInto(ctx, conn, method, req, nil)
}

// rawFrame is a request sent as it is (not JSON).
type rawFrame []byte

// callInto is call with the reply decoded into buf's room when it fits
// (a page lands in the caller's page: no allocation, one copy).
func callInto(ctx context.Context, conn *grpc.ClientConn, method string, req any, buf []byte) ([]byte, error) {
	b, ok := req.(rawFrame)
	if !ok {
		var err error
		if b, err = json.Marshal(req); err != nil {
			return nil, err
		}
	}
	out := &frame{b: buf[:0]}
	err := conn.Invoke(ctx, "/"+serviceName+"/"+method, &frame{b: b}, out, grpc.CallContentSubtype(codecName))
	return out.b, err
}
