package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Local repositories are cloned in-process: go-git's file transport would
// run the system's git-upload-pack, a host binary reading a repository
// that a jail may have made (and that git refuses as "dubious ownership"
// when another uid owns it). Instead the clone talks to go-git's own
// upload-pack, serving a repository opened through an os.Root.
//
// Nothing is found by path: a clone registers its opened repository under
// a random endpoint for its duration, and any other file:// endpoint is
// "repository not found".

// localRepos maps the endpoint path of each local clone under way to its
// storage.
var localRepos sync.Map // string → storer.Storer

type localLoader struct{}

// Load returns the storage registered for ep.
func (localLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	if s, ok := localRepos.Load(ep.Path); ok {
		return s.(storer.Storer), nil
	}
	return nil, transport.ErrRepositoryNotFound
}

func init() {
	client.InstallProtocol("file", server.NewClient(localLoader{}))
	installGuardedHTTP()
}

// serveLocal registers the repository in d under a fresh file:// URL and
// returns it with a function that unregisters it and closes the root.
func serveLocal(d *LocalDir) (string, func(), error) {
	root, err := os.OpenRoot(d.ProcPath())
	if err != nil {
		return "", nil, invalid("source %s: %v", d.Real, err)
	}
	gitRoot, err := gitDir(root, d.Real)
	if err != nil {
		root.Close()
		return "", nil, err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	key := "/warren-local/" + hex.EncodeToString(b[:])
	localRepos.Store(key, filesystem.NewStorage(rootFS{gitRoot}, cache.NewObjectLRUDefault()))
	return "file://" + key, func() {
		localRepos.Delete(key)
		if gitRoot != root {
			gitRoot.Close()
		}
		root.Close()
	}, nil
}

// gitDir finds the repository in a directory: its .git directory, or the
// directory itself when it is bare.
func gitDir(root *os.Root, shown string) (*os.Root, error) {
	if fi, err := root.Lstat(".git"); err == nil {
		if fi.Mode().IsRegular() {
			return nil, invalid("source %s is a linked worktree or a submodule (.git is a file): clone its main repository", shown)
		}
		if fi.IsDir() {
			return root.OpenRoot(".git")
		}
	}
	head, herr := root.Lstat("HEAD")
	objects, oerr := root.Lstat("objects")
	if herr == nil && oerr == nil && head.Mode().IsRegular() && objects.IsDir() {
		return root, nil
	}
	return nil, invalid("source %s is not a git repository", shown)
}

// isRepo reports whether the directory holds a repository (to infer mode).
func isRepo(d *LocalDir) bool {
	root, err := os.OpenRoot(d.ProcPath())
	if err != nil {
		return false
	}
	defer root.Close()
	if fi, err := root.Lstat(".git"); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		return true
	}
	_, err = gitDir(root, d.Real)
	return err == nil
}
