package telemetry

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func TestFlushWritesOneEMFLineAndResets(t *testing.T) {
	var buf bytes.Buffer
	m := New(&buf, clock.Fixed(time.UnixMilli(1700000000000)), "Function", "cleaner")
	m.Declare(Count, MessagesFailed)
	m.Count(ObjectsDeleted, 3)
	m.Count(ObjectsDeleted, 4)
	m.Add(BytesDeleted, Bytes, 1024)
	m.Duration(LockWait, 1500*time.Millisecond)
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
		Function                                               string
		ObjectsDeleted, BytesDeleted, LockWait, MessagesFailed float64
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	cw := doc.AWS.CloudWatchMetrics
	if doc.AWS.Timestamp != 1700000000000 || len(cw) != 1 || cw[0].Namespace != "tablekeep" ||
		len(cw[0].Dimensions) != 1 || cw[0].Dimensions[0][0] != "Function" || doc.Function != "cleaner" ||
		doc.ObjectsDeleted != 7 || doc.BytesDeleted != 1024 || doc.LockWait != 1500 || doc.MessagesFailed != 0 {
		t.Fatalf("EMF %s", buf.String())
	}
	units := map[string]string{}
	for _, x := range cw[0].Metrics {
		units[x.Name] = x.Unit
	}
	if units["BytesDeleted"] != "Bytes" || units["LockWait"] != "Milliseconds" || units["ObjectsDeleted"] != "Count" || len(units) != 4 {
		t.Fatalf("units %v", units)
	}
	buf.Reset()
	if err := m.Flush(); err != nil || buf.Len() != 0 {
		t.Fatalf("second flush wrote %q (%v)", buf.String(), err)
	}
	var nilM *Metrics
	nilM.Count(ObjectsDeleted, 1)
	if err := nilM.Flush(); err != nil || len(nilM.Values()) != 0 {
		t.Fatal("nil recorder")
	}
}

func TestRequestsAttr(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", Requests(objstore.Counts{Get: 1, Put: 2, List: 3, DeleteRequests: 4, DeleteKeys: 5}))
	if !strings.Contains(buf.String(), `"requests":{"get":1,"head":0,"put":2,"list":3,"delete":4,"delete_keys":5}`) {
		t.Fatal(buf.String())
	}
}
