package awsfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfig(t *testing.T) {
	full := map[string]string{
		EnvWarehouse: "s3://tk-bucket/warehouse", EnvLockTable: "locks",
		EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/cleanup",
	}
	c, err := LoadConfig(RoleCompactor, env(full))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bucket != "tk-bucket" || c.Prefix != "warehouse" || c.Margin != 30*time.Second || c.Lease != 5*time.Minute ||
		c.SweepMaxDeletes != 10000 || c.ClockOffset != 0 {
		t.Errorf("defaults: %+v", c)
	}
	// The cleaner needs no lock table, the sweeper no queue either.
	if _, err := LoadConfig(RoleCleaner, env(map[string]string{EnvWarehouse: full[EnvWarehouse], EnvQueueURL: full[EnvQueueURL]})); err != nil {
		t.Errorf("cleaner without lock table: %v", err)
	}
	if _, err := LoadConfig(RoleSweeper, env(map[string]string{EnvWarehouse: full[EnvWarehouse]})); err != nil {
		t.Errorf("sweeper with only the warehouse: %v", err)
	}

	for _, c := range []struct {
		role Role
		set  map[string]string
		want []string // all reported at once
	}{
		{RoleCompactor, map[string]string{}, []string{"TABLEKEEP_WAREHOUSE is not set", "TABLEKEEP_LOCK_TABLE is not set", "TABLEKEEP_QUEUE_URL is not set"}},
		{RoleCleaner, map[string]string{EnvWarehouse: "/local/dir", EnvQueueURL: "cleanup"}, []string{"want an s3://bucket/prefix URI", "is not a queue URL"}},
		{RoleSweeper, map[string]string{EnvWarehouse: "s3://Bad_Bucket/x"}, []string{"invalid bucket name"}},
		{RoleCompactor, map[string]string{EnvMargin: "soon", EnvLease: "1s", EnvSweepDeletes: "0", EnvLogLevel: "loud"},
			[]string{`TABLEKEEP_SAFETY_MARGIN="soon" is not a duration`, "TABLEKEEP_LEASE=1s must be between", "TABLEKEEP_SWEEP_MAX_DELETES", "TABLEKEEP_LOG_LEVEL"}},
		// The clock offset is refused unless explicitly allowed for tests.
		{RoleSweeper, map[string]string{EnvWarehouse: "s3://tk-bucket/w", EnvClockOffset: "2h"}, []string{"TABLEKEEP_CLOCK_OFFSET is for tests only"}},
	} {
		m := map[string]string{}
		if c.role != RoleSweeper && c.set[EnvWarehouse] == "" && len(c.set) > 0 {
			for k, v := range full {
				m[k] = v
			}
		}
		for k, v := range c.set {
			m[k] = v
		}
		_, err := LoadConfig(c.role, env(m))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s %v: %v, want ErrConfig", c.role, c.set, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: %q does not mention %q", c.role, c.set, err, w)
			}
		}
	}
	c, err = LoadConfig(RoleSweeper, env(map[string]string{EnvWarehouse: "s3://tk-bucket/w", EnvClockOffset: "2h", EnvAllowOffset: "test"}))
	if err != nil || c.ClockOffset != 2*time.Hour {
		t.Errorf("allowed test clock offset: %+v %v", c, err)
	}
}

func TestParseEvents(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("../../events/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, src := range map[string]string{"scheduled.json": SourceEventBridge, "scheduler.json": SourceScheduler} {
		ev, err := ParseScheduled(RoleCompactor, read(name))
		if err != nil || ev.Source != src {
			t.Errorf("%s: %+v %v", name, ev, err)
		}
		if _, err := ParseSQS(RoleCleaner, read(name)); !errors.Is(err, ErrUnsupportedEvent) {
			t.Errorf("cleaner accepted %s: %v", name, err)
		}
	}
	for _, name := range []string{"sqs-cleanup.json", "sqs-malformed.json"} {
		ev, err := ParseSQS(RoleCleaner, read(name))
		if err != nil || len(ev.Records) < 2 {
			t.Errorf("%s: %+v %v", name, ev, err)
		}
		if _, err := ParseScheduled(RoleSweeper, read(name)); !errors.Is(err, ErrUnsupportedEvent) || !strings.Contains(err.Error(), "Records") {
			t.Errorf("sweeper accepted %s: %v", name, err)
		}
	}
	for _, raw := range []string{`[]`, `"x"`, `{}`, `{"source":"aws.s3"}`, `{"source":"aws.events","detail-type":"Object Created"}`} {
		if _, err := ParseScheduled(RoleCompactor, []byte(raw)); !errors.Is(err, ErrUnsupportedEvent) {
			t.Errorf("compactor accepted %s: %v", raw, err)
		}
	}
	if _, err := ParseSQS(RoleCleaner, []byte(`{"Records":[{"eventSource":"aws:s3","body":"x"}]}`)); !errors.Is(err, ErrUnsupportedEvent) {
		t.Errorf("cleaner accepted an S3 record: %v", err)
	}
}

func TestEmitMetricsIsEMF(t *testing.T) {
	var buf bytes.Buffer
	d := &Deps{Metrics: &buf, Clock: fixedClock{time.UnixMilli(1700000000000)}}
	m := d.metrics(RoleCompactor)
	m.Count("UnreclaimedVersions", 7)
	m.Count("TableErrors", 0)
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function            string
		UnreclaimedVersions float64
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("not one JSON line: %q %v", buf.String(), err)
	}
	mm := doc.AWS.CloudWatchMetrics
	// The compactor's declared metrics (7) and TableErrors.
	if doc.AWS.Timestamp != 1700000000000 || len(mm) != 1 || mm[0].Namespace != MetricNamespace || len(mm[0].Metrics) != 8 ||
		mm[0].Dimensions[0][0] != "Function" || doc.Function != "compactor" || doc.UnreclaimedVersions != 7 {
		t.Errorf("EMF document %s", buf.String())
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                                   { return c.t }
func (c fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
