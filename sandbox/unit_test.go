package sandbox

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestBwrapArgsDefaultProfileDeniesEverything(t *testing.T) {
	got := BwrapArgs(DefaultProfile("/srv/ws"), JailFDs{Info: 3, Seccomp: 5}, "/bin/sh")
	joined := " " + strings.Join(got, " ") + " "
	for _, want := range []string{
		" --unshare-all ", " --unshare-user ", " --disable-userns ", " --die-with-parent ",
		" --new-session ", " --cap-drop ALL ", " --clearenv ",
		" --ro-bind /usr /usr ", " --ro-bind /etc /etc ", " --proc /proc ", " --dev /dev ",
		" --size 268435456 --perms 1777 --tmpfs /tmp ", " --size 67108864 --perms 1777 --tmpfs /dev/shm ",
		" --bind /srv/ws /workspace ", " --remount-ro / ", " --info-fd 3 ", " --seccomp 5 ", " -- /bin/sh ",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv lacks %q:\n%s", want, joined)
		}
	}
	for _, deny := range []string{"--share-net", "--ro-bind / /", "--bind / /", "/home", "/root"} {
		if strings.Contains(joined, " "+deny+" ") {
			t.Errorf("default argv contains %q", deny)
		}
	}
	if got[len(got)-1] != "/bin/sh" || got[len(got)-2] != "--" {
		t.Errorf("command must follow --: %v", got[len(got)-3:])
	}
}

func TestBwrapArgsTable(t *testing.T) {
	base := DefaultProfile("/w")
	tests := []struct {
		name    string
		edit    func(*Profile)
		want    []string // consecutive args that must appear
		notWant string
	}{
		{"network on", func(p *Profile) { p.Network = true }, []string{"--share-net"}, ""},
		{"read-only workspace", func(p *Profile) { p.ReadOnlyWorkspace = true }, []string{"--ro-bind", "/w", "/workspace"}, "--bind"},
		{"unsized tmp", func(p *Profile) { p.TmpSize = 0 }, []string{"--perms", "1777", "--tmpfs", "/tmp"}, ""},
		{"uid and gid", func(p *Profile) { p.UID, p.GID = 1234, 4321 }, []string{"--uid", "1234", "--gid", "4321"}, ""},
		{"hostname", func(p *Profile) { p.Hostname = "box" }, []string{"--hostname", "box"}, ""},
		{"home", func(p *Profile) { p.Home = "/data/homes/s1" }, []string{"--bind", "/data/homes/s1", "/home/warren"}, ""},
		{"secret env stays off argv", func(p *Profile) { p.Env = map[string]string{"TOKEN": "s3cret"} }, []string{"--clearenv"}, "s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			tt.edit(&p)
			got := BwrapArgs(p, JailFDs{Info: -1, Seccomp: -1}, "sh")
			if !containsRun(got, tt.want) {
				t.Errorf("argv lacks %v:\n%v", tt.want, got)
			}
			if tt.notWant != "" && slices.Contains(got, tt.notWant) {
				t.Errorf("argv contains %q:\n%v", tt.notWant, got)
			}
			if !reflect.DeepEqual(got, BwrapArgs(p, JailFDs{Info: -1, Seccomp: -1}, "sh")) {
				t.Error("BwrapArgs is not deterministic")
			}
		})
	}
}

func containsRun(s, run []string) bool {
	for i := 0; i+len(run) <= len(s); i++ {
		if slices.Equal(s[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

func TestProfileValidate(t *testing.T) {
	for _, p := range []Profile{
		{},
		{Workspace: "relative"},
		{Workspace: "/w", Env: map[string]string{"1BAD": "x"}},
		{Workspace: "/w", Env: map[string]string{"A=B": "x"}},
	} {
		if p.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", p)
		}
	}
	if err := DefaultProfile("/w").Validate(); err != nil {
		t.Errorf("default profile: %v", err)
	}
}

func TestCapBufferKeepsHeadAndTail(t *testing.T) {
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	for _, chunk := range []int{1, 7, 100, 4096, 10000} {
		c := newCapBuffer(1000)
		for i := 0; i < len(data); i += chunk {
			c.Write(data[i:min(i+chunk, len(data))])
		}
		got := c.bytes()
		if c.total != 10000 || !c.truncated() {
			t.Fatalf("chunk %d: total %d truncated %v", chunk, c.total, c.truncated())
		}
		if !bytes.HasPrefix(got, data[:500]) || !bytes.HasSuffix(got, data[len(data)-500:]) {
			t.Fatalf("chunk %d: head/tail wrong", chunk)
		}
		if !bytes.Contains(got, []byte("[... 9000 bytes omitted ...]")) {
			t.Fatalf("chunk %d: no omission marker in %q", chunk, got[480:560])
		}
	}
	c := newCapBuffer(1000)
	c.Write([]byte("short"))
	if string(c.bytes()) != "short" || c.truncated() {
		t.Fatalf("short output changed: %q", c.bytes())
	}
}

func TestParseExports(t *testing.T) {
	in := "export A='1'\nexport B='it'\\''s'\nexport C='two\nlines'\nexport D\nexport E=''\ndeclare -x F=\"x\\\"y\"\n"
	got := parseExports(in)
	want := map[string]string{"A": "1", "B": "it's", "C": "two\nlines", "E": "", "F": `x"y`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseExports = %#v, want %#v", got, want)
	}
	st := State{Cwd: "/workspace/it's", Env: got}
	script := restoreScript(st)
	if !strings.Contains(script, `cd -- '/workspace/it'\''s'`) || !strings.Contains(script, "export C='two\nlines'") {
		t.Fatalf("restore script:\n%s", script)
	}
}

func TestMayStartJobs(t *testing.T) {
	for cmd, want := range map[string]bool{
		"sleep 10 &": true, "a && b": true, "eval \"$x\"": true, ". ./env.sh": true, "x; . env": true,
		"source venv/bin/activate": true, "echo hi": false, "ls ./dir": false, "cat a.txt | wc -l": false,
	} {
		if got := mayStartJobs(cmd); got != want {
			t.Errorf("mayStartJobs(%q) = %v, want %v", cmd, got, want)
		}
	}
}
