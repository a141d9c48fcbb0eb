package proto

// The file operations: what the file tools (read_file, write_file,
// edit_file) do to a workspace, done by the runner inside the jail. A path
// argument is the caller's, as given (relative to the workspace, or
// absolute under it); the runner resolves it as the jail would, never out
// of the workspace. A refusal the user should see comes back as a Fault in
// the result, with what the tools need to say what to do next; a broken
// request is an Error.
const (
	// OpFileRead reads a regular file of at most Limit bytes
	// (FileReadArgs, FileReadResult; output: the file's bytes).
	OpFileRead = "file.read"
	// OpFileWrite replaces a file with the request's input, atomically,
	// or appends the input to it (FileWriteArgs, FileWriteResult).
	OpFileWrite = "file.write"
	// OpFileEdit replaces exact text in a file, atomically; the input is
	// the old text followed by the new (FileEditArgs, FileEditResult).
	OpFileEdit = "file.edit"
	// OpFileStat says what a path names (FileStatArgs, FileStatResult).
	OpFileStat = "file.stat"
)

// MaxFileLimit bounds any size limit a file operation is asked to keep
// to: the runner refuses larger ones, and the server asks for far less.
const MaxFileLimit = 64 << 20

// FileReadArgs are the arguments of OpFileRead.
type FileReadArgs struct {
	Path  string `json:"path"`
	Limit int64  `json:"limit"`
	Exact bool   `json:"exact,omitempty"`
}

// FileReadResult is the result of OpFileRead: where the jail sees the
// file, and how many bytes the output held.
type FileReadResult struct {
	Jail  string     `json:"jail,omitempty"`
	Size  int64      `json:"size"`
	Stamp *FileStamp `json:"stamp,omitempty"`
	Fault *FileFault `json:"fault,omitempty"`
}

// FileWriteArgs are the arguments of OpFileWrite. With Append the file's
// old content (at most Limit bytes, else a too_big fault) comes first.
// MaxGrow, unless negative, refuses a write that would make the file
// grow by more than that many bytes: nothing is written, and the result
// says by how much it would have grown (Refused), for the quota.
//
// With Exact (see Exact reads), IfMissing or IfStamp make the write a
// compare-and-write: it is made only while the file is still missing, or
// still the version IfStamp names, else it fails with a changed fault and
// nothing is written; an exact write is synced to disk before the rename,
// and removes the temporary files of the same name that a killed writer
// left behind more than a minute ago.
type FileWriteArgs struct {
	Path      string     `json:"path"`
	Append    bool       `json:"append,omitempty"`
	Limit     int64      `json:"limit,omitempty"`
	MaxGrow   int64      `json:"max_grow"`
	Exact     bool       `json:"exact,omitempty"`
	IfMissing bool       `json:"if_missing,omitempty"`
	IfStamp   *FileStamp `json:"if_stamp,omitempty"`
}

// FileWriteResult is the result of OpFileWrite and the core of
// FileEditResult: where the jail sees the file, its size before and
// after, and whether the write was refused for growing past MaxGrow.
type FileWriteResult struct {
	Jail    string     `json:"jail,omitempty"`
	OldSize int64      `json:"old_size"`
	Size    int64      `json:"size"`
	Refused bool       `json:"refused,omitempty"`
	Stamp   *FileStamp `json:"stamp,omitempty"`
	Fault   *FileFault `json:"fault,omitempty"`
}

// FileEditArgs are the arguments of OpFileEdit: the input's first OldLen
// bytes are the text to replace, the rest its replacement. It must occur
// once unless All; when it does not (Found says how often it does),
// nothing is written. Limit bounds the file read, MaxGrow is
// FileWriteArgs'.
type FileEditArgs struct {
	Path    string `json:"path"`
	OldLen  int    `json:"old_len"`
	All     bool   `json:"all,omitempty"`
	Limit   int64  `json:"limit"`
	MaxGrow int64  `json:"max_grow"`
}

// FileEditResult is the result of OpFileEdit.
type FileEditResult struct {
	FileWriteResult
	Found    int `json:"found"`
	Replaced int `json:"replaced"`
}

// FileStatArgs are the arguments of OpFileStat.
type FileStatArgs struct {
	Path  string `json:"path"`
	Exact bool   `json:"exact,omitempty"`
}

// FileStatResult is the result of OpFileStat: where the jail sees the
// entry the path resolves to, whether it exists, its type (one of the
// FileType names) and, for a regular file, its size.
type FileStatResult struct {
	Jail   string     `json:"jail,omitempty"`
	Exists bool       `json:"exists"`
	Type   string     `json:"type,omitempty"`
	Size   int64      `json:"size"`
	Stamp  *FileStamp `json:"stamp,omitempty"`
	Fault  *FileFault `json:"fault,omitempty"`
}

// An exact operation (Exact in its arguments) reaches the entry the path
// names and nothing else, for a file whose every version matters (the
// task board's TASKS.md): the path is relative to the workspace, with no
// "..", no symbolic link anywhere along it (a FaultLink names the first
// one), and a regular file is refused when it has other hard links
// (FaultHardLinks). Its result carries the file's Stamp, and a write's
// the stamp of the file it made. A missing directory on the way is no
// fault: the file does not exist (a write creates the directories).

// FileStamp identifies one version of a regular file without its
// content: a new inode (every rename), size or change time (every write,
// which user space cannot set back) makes a new stamp. Times are in
// nanoseconds since the epoch.
type FileStamp struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Links uint64 `json:"links"`
}

// FileFault is a file operation refused or failed on one entry, as the
// tools show it: Message says what is wrong, the fields let the server
// add what to do next.
type FileFault struct {
	// Kind is what went wrong: one of the Fault... names.
	Kind string `json:"kind"`
	// Op is the step that failed: resolve, read, write or mkdir.
	Op string `json:"op"`
	// Path names the entry as Message does: as the caller gave it, or as
	// the jail sees it.
	Path string `json:"path"`
	// Jail is the entry as the jail sees it, "" when the path never
	// resolved.
	Jail string `json:"jail,omitempty"`
	// Type is what the entry is, with FaultNotRegular (a FileType name).
	Type string `json:"type,omitempty"`
	// Size and Limit go with FaultTooBig: the file's size (0 when it grew
	// past Limit while it was read) and the limit.
	Size  int64 `json:"size,omitempty"`
	Limit int64 `json:"limit,omitempty"`
	// Message is the text a user sees.
	Message string `json:"message"`
}

// The kinds of FileFault.
const (
	FaultBadPath      = "bad_path"       // empty, or with a NUL byte
	FaultOutside      = "outside"        // the path or a link along it leads out of the workspace
	FaultTooManyLinks = "too_many_links" // a loop of symbolic links
	FaultNotFound     = "not_found"      // no such entry
	FaultNotRegular   = "not_regular"    // a directory, FIFO, device or socket where a file is read or replaced
	FaultNotDir       = "not_dir"        // a file where a write needs a directory
	FaultNotDirPath   = "enotdir"        // the system's ENOTDIR: a file along the path
	FaultTooBig       = "too_big"        // over the limit asked
	FaultChanged      = "changed"        // swapped by the jail while it was written: retry
	FaultPermission   = "permission"     // the jail's uid may not
	FaultSystem       = "system"         // another error of the system
	FaultLink         = "link"           // a symbolic link on the path of an exact operation
	FaultHardLinks    = "hard_links"     // a regular file with other hard links, for an exact operation
)

// The FileType names of entries.
const (
	TypeFile      = "file"
	TypeDir       = "dir"
	TypeSymlink   = "symlink"
	TypeFIFO      = "fifo"
	TypeCharDev   = "char_device"
	TypeBlockDev  = "block_device"
	TypeSocket    = "socket"
	TypeIrregular = "irregular"
)
