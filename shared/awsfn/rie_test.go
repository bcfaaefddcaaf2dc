package awsfn_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the module root (tests run in shared/awsfn).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// buildBootstraps builds the one bootstrap all functions run
// (functions/tablekeep) as Lambda does (linux, CGO_ENABLED=0, -tags
// lambda.norpc, -ldflags=-s -w) for the host architecture, and returns
// dir/<name>/bootstrap paths: each a two-line script that sets
// TABLEKEEP_FUNCTION=<name>, as template.yaml does per function (unless the
// test's environment sets it), and runs that binary.
func buildBootstraps(t *testing.T, names ...string) map[string]string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Fatalf("the aws-lambda-rie end-to-end test needs linux (bootstraps are linux binaries), not %s", runtime.GOOS)
	}
	root := repoRoot(t)
	out := t.TempDir()
	bin := filepath.Join(out, "tablekeep")
	args := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, "./functions/tablekeep"}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	paths := map[string]string{}
	for _, n := range names {
		dir := filepath.Join(out, n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "bootstrap")
		script := "#!/bin/sh\nexport TABLEKEEP_FUNCTION=\"${TABLEKEEP_FUNCTION:-" + n + "}\"\nexec " + bin + "\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		paths[n] = p
	}
	return paths
}

func rieBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "aws-lambda-rie")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("aws-lambda-rie not found on PATH or in %s: run `make tools` (it installs it)", filepath.Dir(p))
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// rie is one function running under aws-lambda-rie. It takes one
// invocation at a time (the emulator fails on concurrent ones).
type rie struct {
	name string
	url  string
	cmd  *exec.Cmd
	log  *syncBuffer
}

// syncBuffer collects the emulator's output while tests read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRIE runs bootstrap under aws-lambda-rie on two free loopback ports
// with env added to the test's environment; the emulator and its runtime
// are killed (by process group id) when the test ends.
func startRIE(t *testing.T, name, bootstrap string, env []string) *rie {
	t.Helper()
	bin := rieBinary(t)
	for attempt := 1; ; attempt++ {
		api, rapid := freePort(t), freePort(t)
		r := &rie{name: name, url: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", api), log: &syncBuffer{}}
		r.cmd = exec.Command(bin, "--runtime-interface-emulator-address", fmt.Sprintf("127.0.0.1:%d", api),
			"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", rapid), "./bootstrap")
		r.cmd.Dir = filepath.Dir(bootstrap)
		r.cmd.Env = append(os.Environ(), env...)
		r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := r.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = r.cmd.Wait(); close(exited) }()
		stop := func() {
			pid := r.cmd.Process.Pid
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(3 * time.Second):
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				<-exited
			}
		}
		if waitListening(fmt.Sprintf("127.0.0.1:%d", api), exited) {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("--- %s (aws-lambda-rie) output:\n%s", name, r.log.String())
				}
			})
			return r
		}
		stop()
		if attempt == 3 {
			t.Fatalf("aws-lambda-rie for %s did not start:\n%s", name, r.log.String())
		}
	}
}

// waitListening waits until addr accepts connections: false if the
// emulator exited first (a port taken: startRIE retries on new ports) or
// after 30 s, a bound that a slow start on a loaded machine does not reach.
func waitListening(addr string, exited chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// invokeRaw posts one event and returns the response body. The emulator
// answers 200 even when the function fails; the body then has errorMessage.
func (r *rie) invokeRaw(t *testing.T, event []byte) []byte {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Minute}
	resp, err := client.Post(r.url, "application/json", bytes.NewReader(event))
	if err != nil {
		t.Fatalf("invoke %s: %v", r.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke %s: HTTP %d: %s", r.name, resp.StatusCode, body)
	}
	return body
}

type lambdaError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// invokeError returns the function error of a response ("" if it succeeded).
func invokeError(body []byte) string {
	var e lambdaError
	if json.Unmarshal(body, &e) == nil && e.ErrorMessage != "" {
		return e.ErrorMessage
	}
	return ""
}

// invoke posts event and decodes a successful response into out.
func (r *rie) invoke(t *testing.T, event []byte, out any) {
	t.Helper()
	body := r.invokeRaw(t, event)
	if msg := invokeError(body); msg != "" {
		t.Fatalf("%s failed: %s", r.name, msg)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s response %s: %v", r.name, body, err)
	}
}

func readEvent(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
