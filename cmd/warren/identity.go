package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/gitpush"
	"github.com/warrenhq/warren/sessions/identity"
)

// gitConfig is the "git" section of the config file.
type gitConfig struct {
	// SecretKeyFile holds the server key that seals identities' private
	// keys and tokens (32 bytes, raw, hex or base64; mode 0600). Empty:
	// $WARREN_SECRET_KEY, else <data-dir>/secret.key, made on first use.
	SecretKeyFile string `json:"secret_key_file,omitempty"`
	// KnownHostsFile pins SSH host keys for every identity (OpenSSH
	// known_hosts format). Hosts not in it are pinned per identity on first use.
	KnownHostsFile string `json:"known_hosts_file,omitempty"`
}

// relTo makes a config path relative to the config file's directory.
func relTo(cfg *config, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(cfg.path), p)
}

// pinnedHosts reads the operator's known_hosts file, if the config names one.
func pinnedHosts(cfg *config) (ssh.HostKeyCallback, error) {
	p := relTo(cfg, cfg.Git.KnownHostsFile)
	if p == "" {
		return nil, nil
	}
	cb, err := knownhosts.New(p)
	if err != nil {
		return nil, fmt.Errorf("config %s: git.known_hosts_file: %w", cfg.path, err)
	}
	return cb, nil
}

func identityCommand() *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{dataDirFlag(), configFlag(),
			&cli.StringFlag{Name: "user", Usage: "whose identities (default: you, the user of 'serve stdio')"},
		}, extra...)
	}
	newFlags := func() []cli.Flag {
		return flags(
			&cli.StringFlag{Name: "name", Required: true, Usage: "the identity's name, as session_create's identity names it"},
			&cli.StringFlag{Name: "author-name", Required: true, Usage: "the author name of the commits pushed with it"},
			&cli.StringFlag{Name: "author-email", Required: true, Usage: "the author email of the commits pushed with it"},
			&cli.StringFlag{Name: "token-file", Usage: "a file holding a forge token (HTTPS clones and pushes, pull requests); '-' reads it from stdin"},
			&cli.StringFlag{Name: "token-user", Usage: "the user name sent with the token over HTTPS (default x-access-token)"},
			&cli.StringFlag{Name: "forge-url", Usage: "the forge's API base URL for pull requests (default: guessed from the remote, https://api.github.com for github.com)"},
		)
	}
	return &cli.Command{
		Name:  "identity",
		Usage: "git identities: the key or token a session clones and pushes with, and the author of its commits",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "generate an Ed25519 key and store a new identity; prints its public key (last line)",
				Flags:  append(newFlags(), &cli.BoolFlag{Name: "no-key", Usage: "no SSH key: the identity has a token only"}),
				Action: runIdentityCreate},
			{Name: "import", Usage: "store a new identity with an existing private key (a passphrase is asked on the terminal, or read as the first line of stdin)",
				ArgsUsage: "KEY_FILE", Flags: newFlags(), Action: runIdentityImport},
			{Name: "ls", Usage: "list identities (never their secrets)", Flags: flags(&cli.BoolFlag{Name: "json", Usage: "print JSON"}),
				Action: runIdentityList},
			{Name: "rm", Usage: "remove an identity, its sealed key and token, and its pinned host keys", ArgsUsage: "NAME",
				Flags: flags(), Action: runIdentityRemove},
			{Name: "hosts", Usage: "list the SSH host keys pinned for an identity", ArgsUsage: "NAME",
				Flags: flags(), Action: runIdentityHosts},
			{Name: "forget-host", Usage: "forget the host key pinned for HOST[:PORT] (after checking its new key with the server's administrator)",
				ArgsUsage: "NAME HOST", Flags: flags(), Action: runIdentityForgetHost},
		},
	}
}

// openGit opens the identity and push stores over db and returns the
// service behind identity_list, session_push and session_create's
// identity. The server key is read (or made) on first use.
func openGit(c *cli.Context, db *sql.DB, dir string, mgr *sessions.Manager, log zerolog.Logger) (*gitpush.Service, error) {
	cfg, err := loadConfig(c, dir)
	if err != nil {
		return nil, err
	}
	pinned, err := pinnedHosts(cfg)
	if err != nil {
		return nil, err
	}
	ids, err := identity.Open(c.Context, db, identity.LazyKey(dir, relTo(cfg, cfg.Git.SecretKeyFile)))
	if err != nil {
		return nil, err
	}
	st, err := gitpush.OpenStore(c.Context, db)
	if err != nil {
		return nil, err
	}
	return &gitpush.Service{Sessions: mgr, Identities: ids, Store: st, Pinned: pinned, Log: log}, nil
}

type identityEnv struct {
	store *identity.Store
	user  string
	close func()
}

func openIdentityEnv(c *cli.Context) (*identityEnv, error) {
	dir, cfg, db, err := openData(c)
	if err != nil {
		return nil, err
	}
	st, err := identity.Open(c.Context, db, identity.LazyKey(dir, relTo(cfg, cfg.Git.SecretKeyFile)))
	if err != nil {
		db.Close()
		return nil, err
	}
	user := c.String("user")
	if user == "" {
		user = sessions.LocalUser()
	}
	return &identityEnv{store: st, user: user, close: func() { db.Close() }}, nil
}

func identityOptions(c *cli.Context, user string) (identity.Options, error) {
	o := identity.Options{Owner: user, Name: c.String("name"), AuthorName: c.String("author-name"),
		AuthorEmail: c.String("author-email"), TokenUser: c.String("token-user"), ForgeURL: c.String("forge-url")}
	if f := c.String("token-file"); f != "" {
		var b []byte
		var err error
		if f == "-" {
			b, err = io.ReadAll(io.LimitReader(c.App.Reader, 8192))
		} else {
			b, err = os.ReadFile(f)
		}
		if err != nil {
			return o, fmt.Errorf("read token: %w", err)
		}
		o.Token = strings.TrimSpace(string(b))
		if o.Token == "" {
			return o, cli.Exit("the token file is empty", 2)
		}
	}
	return o, nil
}

func printIdentity(c *cli.Context, id identity.Identity) {
	fmt.Fprintf(c.App.ErrWriter, "identity %s of %s: commits by %s <%s>", id.Name, id.Owner, id.AuthorName, id.AuthorEmail)
	if id.HasToken {
		fmt.Fprint(c.App.ErrWriter, ", with a token")
	}
	fmt.Fprintln(c.App.ErrWriter)
	if id.PublicKey != "" {
		fmt.Fprintln(c.App.ErrWriter, "add this public key to GitHub, GitLab or the server's authorized_keys:")
		fmt.Fprintln(c.App.Writer, id.PublicKey)
	}
}

func runIdentityCreate(c *cli.Context) error {
	e, err := openIdentityEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	o, err := identityOptions(c, e.user)
	if err != nil {
		return err
	}
	o.NoKey = c.Bool("no-key")
	id, err := e.store.Create(c.Context, o)
	if err != nil {
		return err
	}
	printIdentity(c, id)
	return nil
}

func runIdentityImport(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("usage: warren identity import [flags] KEY_FILE", 2)
	}
	key, err := os.ReadFile(c.Args().First())
	if err != nil {
		return fmt.Errorf("read key: %w", err)
	}
	defer clear(key)
	e, err := openIdentityEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	o, err := identityOptions(c, e.user)
	if err != nil {
		return err
	}
	id, err := e.store.Import(c.Context, o, key, nil)
	if errors.Is(err, identity.ErrPassphrase) {
		pass, perr := readPassphrase(c)
		if perr != nil {
			return perr
		}
		id, err = e.store.Import(c.Context, o, key, pass)
		clear(pass)
	}
	if err != nil {
		return err
	}
	printIdentity(c, id)
	return nil
}

// readPassphrase asks on the terminal with echo off; when stdin is not a
// terminal (a script, a test) it reads stdin's first line.
func readPassphrase(c *cli.Context) ([]byte, error) {
	f, isFile := c.App.Reader.(*os.File)
	if isFile {
		if old, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			fmt.Fprint(c.App.ErrWriter, "passphrase of the private key: ")
			noEcho := *old
			noEcho.Lflag &^= unix.ECHO
			if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, &noEcho); err != nil {
				return nil, err
			}
			defer func() {
				unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, old)
				fmt.Fprintln(c.App.ErrWriter)
			}()
		}
	}
	line, err := bufio.NewReader(io.LimitReader(c.App.Reader, 4096)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	line = []byte(strings.TrimRight(string(line), "\r\n"))
	if len(line) == 0 {
		return nil, cli.Exit("the private key is protected by a passphrase: type it (or give it as the first line of stdin)", 2)
	}
	return line, nil
}

func runIdentityList(c *cli.Context) error {
	e, err := openIdentityEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	list, err := e.store.List(c.Context, e.user)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tAUTHOR\tKEY\tTOKEN\tCREATED")
	for _, id := range list {
		key := "-"
		if id.Fingerprint != "" {
			key = id.Fingerprint
		}
		tok := "no"
		if id.HasToken {
			tok = "yes"
		}
		fmt.Fprintf(w, "%s\t%s <%s>\t%s\t%s\t%s\n", id.Name, id.AuthorName, id.AuthorEmail, key, tok,
			id.CreatedAt.Format("2006-01-02 15:04"))
	}
	return w.Flush()
}

func runIdentityRemove(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("usage: warren identity rm [flags] NAME", 2)
	}
	e, err := openIdentityEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.store.Remove(c.Context, e.user, c.Args().First()); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "removed identity %s\n", c.Args().First())
	return nil
}

func runIdentityHosts(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("usage: warren identity hosts [flags] NAME", 2)
	}
	e, err := openIdentityEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	hosts, err := e.store.KnownHosts(c.Context, e.user, c.Args().First())
	if err != nil {
		return err
	}
	for _, h := range hosts {
		fmt.Fprintf(c.App.Writer, "%s %s %s %s\n", h.Host, h.KeyType, h.Fingerprint, h.PinnedAt.Format("2006-01-02 15:04"))
	}
	return nil
}

func runIdentityForgetHost(c *cli.Context) error {
	if c.NArg() != 2 {
		return cli.Exit("usage: warren identity forget-host [flags] NAME HOST[:PORT]", 2)
	}
	e, err := openIdentityEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	return e.store.ForgetHost(c.Context, e.user, c.Args().Get(0), c.Args().Get(1))
}
