package awsfn

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
)

// TestCompactorRefusesLeaseNotExceedingTimeout: the compactor refuses to
// work when the table lease does not outlast its invocation (TableLease
// must exceed CompactorTimeout), with a configuration error naming both,
// before touching any service (Deps has none here).
func TestCompactorRefusesLeaseNotExceedingTimeout(t *testing.T) {
	var log bytes.Buffer
	d := &Deps{Config: Config{Role: RoleCompactor, Lease: 5 * time.Minute}, Logger: NewLogger(&log, "info", RoleCompactor)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := d.compactWithinLease(ctx, []byte(`{}`))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "TABLEKEEP_LEASE=5m0s must exceed the function's timeout") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(log.String(), "refusing to run") {
		t.Errorf("not logged: %s", log.String())
	}
	short, cancel2 := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel2()
	if err := leaseCovers(short, 5*time.Minute); err != nil {
		t.Errorf("a 5m lease over a 4m invocation refused: %v", err)
	}
	if err := leaseCovers(context.Background(), time.Second); err != nil {
		t.Errorf("no deadline: %v", err)
	}
}

// TestMetricsStackDimension: with TABLEKEEP_STACK the EMF lines carry the
// Stack dimension beside Function, so alarms of one stack see only its own
// functions' metrics.
func TestMetricsStackDimension(t *testing.T) {
	c, err := LoadConfig(RoleSweeper, env(map[string]string{EnvWarehouse: "s3://tk-bucket/w", EnvStack: "prod-tablekeep"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	d := &Deps{Config: c, Clock: fakeclock.New(time.Unix(1767225600, 0)), Metrics: &out}
	m := d.metrics(RoleSweeper)
	m.Count("TableErrors", 1)
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Dimensions":[["Stack","Function"]]`, `"Stack":"prod-tablekeep"`, `"Function":"sweeper"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("EMF line %s lacks %s", out.String(), want)
		}
	}
	if _, err := LoadConfig(RoleSweeper, env(map[string]string{EnvWarehouse: "s3://tk-bucket/w", EnvStack: "no spaces"})); !errors.Is(err, ErrConfig) {
		t.Errorf("bad stack name accepted: %v", err)
	}
}
