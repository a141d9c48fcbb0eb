package main

import (
	"debug/elf"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the checkout the tests run in (the justfile's directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// just runs a recipe of the repository's justfile (just is installed by
// .ci/run; a missing just fails the test, it is not skipped).
func just(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("just", args...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("just %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// `just serve` does what serving needs and nothing else: it installs
// bubblewrap when missing, never the browser or the other tools that only
// the tests use. `just test` still installs those (the check can fail).
func TestJustServeInstallsOnlyWhatServingNeeds(t *testing.T) {
	serve := just(t, "--dry-run", "serve")
	for _, tool := range []string{"chromium", "curl", "install -y -qq git"} {
		if strings.Contains(serve, tool) {
			t.Errorf("'just serve' runs something about %q, which serving does not need:\n%s", tool, serve)
		}
	}
	if !strings.Contains(serve, "bwrap") {
		t.Errorf("'just serve' does not check for bubblewrap:\n%s", serve)
	}
	if test := just(t, "--dry-run", "test"); !strings.Contains(test, "chromium") {
		t.Errorf("'just test' no longer installs the browser its console tests need:\n%s", test)
	}
}

// `just build` makes a stripped, static binary whose --version names the
// commit.
func TestJustBuildIsStrippedStaticAndVersioned(t *testing.T) {
	dir := t.TempDir()
	just(t, "build", dir)
	bin := filepath.Join(dir, "warren")
	for _, b := range []string{bin, filepath.Join(dir, "warren-runner")} {
		checkStrippedStatic(t, b)
	}
	st, _ := os.Stat(bin)
	rst, _ := os.Stat(filepath.Join(dir, "warren-runner"))
	head, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), strings.TrimSpace(string(head))) {
		t.Errorf("%s --version = %q (%v), want the commit %s", bin, out, err, head)
	}
	t.Logf("just build: warren %d MB, warren-runner %d KB", st.Size()>>20, rst.Size()>>10)
}

// checkStrippedStatic fails unless bin is stripped and statically linked.
func checkStrippedStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
		t.Errorf("%s keeps its symbol table or DWARF: want it stripped (-s -w)", bin)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked: want a static binary (CGO_ENABLED=0)", bin)
		}
	}
}

// A plain 'go build' where the toolchain stamps no version control
// information (GOFLAGS=-buildvcs=false, which some machines set in their go
// env, or a build outside a checkout) says so in --version and how to get
// a version naming the commit, instead of a bare "dev". What it prints
// when the commit is stamped is TestVersionFromBuildInfo's.
func TestGoBuildWithoutVCSSaysHowToVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "warren")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "--version").Output()
	if want := "'just build', or 'go build -buildvcs=true' in a git checkout, names the commit"; !strings.Contains(string(out), want) {
		t.Errorf("GOFLAGS=-buildvcs=false go build; warren --version = %q, want %q in it", out, want)
	}
}

// 'warren chat doctor' that cannot start names the config file it means
// by its path: with no model configured, and when the endpoint refuses
// the key.
func TestChatDoctorNamesTheConfigFile(t *testing.T) {
	data := t.TempDir()
	cfgPath := filepath.Join(data, "config.json")
	t.Setenv("WARREN_MODEL", "")
	t.Setenv("OPENAI_API_KEY", "")
	if out := warrenFails(t, "chat", "doctor", "--data-dir", data); !strings.Contains(out, "agent.model in "+cfgPath) {
		t.Errorf("chat doctor with no model: %q, want the config's path %s", out, cfgPath)
	}
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	defer refuse.Close()
	t.Setenv("OPENAI_API_KEY", "sk-wrong")
	out := warrenFails(t, "chat", "doctor", "--data-dir", data, "--model", "gpt-4o", "--base-url", refuse.URL+"/v1")
	if !strings.Contains(out, "401") || !strings.Contains(out, "the config file is "+cfgPath) {
		t.Errorf("chat doctor refused by the endpoint: %q, want the 401 and the config's path %s", out, cfgPath)
	}
}
