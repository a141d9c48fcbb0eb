package mcp

// checkGrowth refuses to write size bytes to rel when that would take the
// session's workspace and home over its disk quota, before anything is
// written. The growth is the new size minus the size of the file it
// replaces, so that editing a file in a session near its quota works.
func (d *deps) checkGrowth(w *ws, rel string, size int) error {
	var old int64
	if fi, err := w.root.Lstat(rel); err == nil && fi.Mode().IsRegular() {
		old = fi.Size()
	}
	return d.sessions.CheckWrite(w.session, int64(size)-old, "write "+jailPath(rel))
}
