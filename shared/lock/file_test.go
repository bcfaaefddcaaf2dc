package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

func TestFileLocker(t *testing.T) {
	testLocker(t, func(t *testing.T) store {
		dir := t.TempDir()
		return func(clock clock.Clock) Locker {
			lk, err := NewFileLocker(dir, clock)
			if err != nil {
				t.Fatal(err)
			}
			return lk
		}
	})
}

func TestFileLockerNames(t *testing.T) {
	dir := t.TempDir()
	lk, err := NewFileLocker(dir, newFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	long := string(make([]byte, 300))
	for _, name := range []string{"s3://bucket/a/b.lance", "..", "a/../../b", long} {
		if _, err := lk.Acquire(context.Background(), name, AcquireOptions{Owner: "o", Lease: time.Minute, MaxWait: -1}); err != nil {
			t.Errorf("acquire %q: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 8 { // one .json and one .lk per name, all inside dir
		t.Errorf("%d files in the lock directory, want 8: %v", len(entries), entries)
	}
}

// Env vars that turn the test binary into a contender process for
// TestFileLockerAcrossProcesses.
const (
	helperDirEnv    = "TABLEKEEP_LOCK_HELPER_DIR"
	helperRoundsEnv = "TABLEKEEP_LOCK_HELPER_ROUNDS"
)

func TestFileLockerAcrossProcesses(t *testing.T) {
	if os.Getenv(helperDirEnv) != "" {
		return // running as a helper: see TestMain
	}
	const procs, rounds = 4, 5
	dir := t.TempDir()
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperRoundsEnv+"="+strconv.Itoa(rounds), "TABLEKEEP_LOCK_HELPER_ID="+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("contender %d: %v", i, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, base("shared")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Token != procs*rounds || r.Owner != "" {
		t.Errorf("final record %+v, want token %d and released", r, procs*rounds)
	}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		if err := contend(dir); err != nil {
			fmt.Fprintln(os.Stderr, "contender:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// contend acquires the lock "shared" repeatedly on the real clock and, while
// holding it, creates and removes a marker file that must not exist already.
func contend(dir string) error {
	ctx := context.Background()
	rounds, _ := strconv.Atoi(os.Getenv(helperRoundsEnv))
	lk, err := NewFileLocker(dir, clock.System())
	if err != nil {
		return err
	}
	owner := "proc-" + os.Getenv("TABLEKEEP_LOCK_HELPER_ID")
	marker := filepath.Join(dir, "inside")
	for range rounds {
		l, err := lk.Acquire(ctx, "shared", AcquireOptions{Owner: owner, Lease: time.Minute, MaxWait: 30 * time.Second})
		if err != nil {
			return err
		}
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s holds token %d but another process is inside", owner, l.Token)
		}
		if err != nil {
			return err
		}
		f.Close()
		if err := os.Remove(marker); err != nil {
			return err
		}
		if err := lk.Release(ctx, l); err != nil {
			return err
		}
	}
	return nil
}
