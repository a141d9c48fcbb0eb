package proto

// OpUnpack writes a tree the server sends under a directory of the jail
// (UnpackArgs, UnpackResult). Input: tree records (the format of OpTree's
// output), every file with its content. It is how a workspace's first
// content (a directory or a clone the server made before any jail had
// seen it) reaches a runner whose workspace is not on the server's host:
// the Sandbox volume of a session in Kubernetes. The runner does the
// writing, by descriptor, never through a link.
const OpUnpack = "unpack"

// Hard limits of one OpUnpack, whatever its arguments ask.
const (
	MaxUnpackEntries = 1 << 20
	MaxUnpackDepth   = 256
	MaxUnpackBytes   = 64 << 30
)

// UnpackArgs are the arguments of OpUnpack.
type UnpackArgs struct {
	// Root is the directory to write under, as the jail sees it
	// (/workspace); it must exist.
	Root string `json:"root"`
	// MaxEntries, MaxDepth and MaxBytes bound the input: a stream past
	// one of them is refused where it crosses it. Each is at most the
	// hard limit above.
	MaxEntries int   `json:"max_entries"`
	MaxDepth   int   `json:"max_depth"`
	MaxBytes   int64 `json:"max_bytes"`
}

// UnpackResult is the result of OpUnpack: what was written.
type UnpackResult struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
}
