package awsfn_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/awsfn"
)

// samTemplate is template.yaml after the SAM transform, run offline by the
// samtranslator that cfn-lint bundles (infra/sam-transform.py): the
// resources CloudFormation will create.
func samTemplate(t *testing.T) map[string]any {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found: it runs infra/sam-transform.py (with cfn-lint: pip install cfn-lint)")
	}
	root := repoRoot(t)
	cmd := exec.Command(py, filepath.Join(root, "infra", "sam-transform.py"), "template.yaml")
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("infra/sam-transform.py: %v\n%s", err, stderr.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func obj(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func resourcesOfType(doc map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range doc["Resources"].(map[string]any) {
		if obj(r, "Type") == typ {
			out[id] = r.(map[string]any)
		}
	}
	return out
}

var periodMap = `{"Fn::FindInMap":["CompactorPeriods",{"Ref":"CompactorPeriodMinutes"},"Seconds"]}`

// TestSAMTemplateSchedulesAndFunctions checks the transformed template for
// issue 13's scheduling points: EventBridge Scheduler schedules with a
// flexible window, retries and a DLQ, whose input the functions accept;
// reserved concurrency and a maximum event age on the scheduled functions;
// RecursiveLoop Allow on the cleaner; no physical names that a long stack
// name could push over a limit.
func TestSAMTemplateSchedulesAndFunctions(t *testing.T) {
	doc := samTemplate(t)
	fns := resourcesOfType(doc, "AWS::Lambda::Function")
	if len(fns) != 3 {
		t.Fatalf("functions: %d, want 3", len(fns))
	}
	schedules := resourcesOfType(doc, "AWS::Scheduler::Schedule")
	targets := map[string]bool{}
	for id, s := range schedules {
		p := obj(s, "Properties")
		target := jsonOf(obj(p, "Target", "Arn"))
		fn := ""
		for f := range fns {
			if strings.Contains(target, `"`+f+`"`) {
				fn = f
			}
		}
		targets[fn] = true
		if obj(p, "FlexibleTimeWindow", "Mode") != "FLEXIBLE" || obj(p, "FlexibleTimeWindow", "MaximumWindowInMinutes") == nil {
			t.Errorf("%s: flexible window %v", id, obj(p, "FlexibleTimeWindow"))
		}
		if !strings.Contains(jsonOf(obj(p, "Target", "DeadLetterConfig", "Arn")), "ScheduleDeadLetterQueue") {
			t.Errorf("%s: no DLQ: %v", id, obj(p, "Target", "DeadLetterConfig"))
		}
		if obj(p, "Target", "RetryPolicy", "MaximumEventAgeInSeconds") == nil {
			t.Errorf("%s: no retry policy", id)
		}
		if obj(p, "Name") != nil {
			t.Errorf("%s: a fixed schedule name (collides between stacks): %v", id, obj(p, "Name"))
		}
		in, _ := obj(p, "Target", "Input").(string)
		in = strings.NewReplacer("<aws.scheduler.execution-id>", "0a1b", "<aws.scheduler.scheduled-time>", "2026-01-01T00:00:00Z",
			"<aws.scheduler.schedule-arn>", "arn:aws:scheduler:us-east-1:123456789012:schedule/default/x").Replace(in)
		for _, role := range []awsfn.Role{awsfn.RoleCompactor, awsfn.RoleSweeper} {
			if ev, err := awsfn.ParseScheduled(role, []byte(in)); err != nil || ev.Source != awsfn.SourceScheduler {
				t.Errorf("%s: input %s not accepted by the %s: %v", id, in, role, err)
			}
		}
	}
	if !targets["CompactorFunction"] || !targets["SweeperFunction"] || len(schedules) != 2 {
		t.Errorf("schedules %v target %v, want the compactor and the sweeper", len(schedules), targets)
	}
	for id, r := range resourcesOfType(doc, "AWS::Events::Rule") {
		if strings.Contains(jsonOf(obj(r, "Properties", "Targets")), "Function") {
			t.Errorf("%s: a plain EventBridge rule invokes a function (want EventBridge Scheduler)", id)
		}
	}
	for id, f := range fns {
		p := obj(f, "Properties")
		if obj(p, "FunctionName") != nil {
			t.Errorf("%s: FunctionName %v does not fit every stack name (64 characters)", id, obj(p, "FunctionName"))
		}
		if !strings.Contains(jsonOf(obj(p, "LoggingConfig", "LogGroup")), strings.TrimSuffix(id, "Function")+"LogGroup") {
			t.Errorf("%s: logs to %v, want its own log group (its role may write only there)", id, obj(p, "LoggingConfig"))
		}
	}
	for _, id := range []string{"CleanerFunction", "CompactorFunction"} {
		if obj(fns[id], "Properties", "RecursiveLoop") != "Allow" {
			t.Errorf("%s: RecursiveLoop is not Allow (it sends continuations or table jobs to the queue that triggers it)", id)
		}
	}
	// No reserved concurrency by default: a new account's quota of 10
	// leaves none to reserve (Lambda keeps 10 unreserved), and `sam deploy
	// --guided` must succeed first time (issue 32). Its description names
	// the value that leaves room for the fan-out.
	for _, p := range []string{"CompactorReservedConcurrency", "SweeperReservedConcurrency"} {
		if d := jsonOf(obj(doc, "Parameters", p, "Default")); d != "0" {
			t.Errorf("%s default %s: want 0 (none), or a new account's deploy fails", p, d)
		}
	}
	if mc := jsonOf(obj(doc, "Parameters", "CompactionMaxConcurrency", "Default")); func() bool {
		m, _ := strconv.Atoi(mc)
		return !strings.Contains(jsonOf(obj(doc, "Parameters", "CompactorReservedConcurrency", "Description")), "CompactionMaxConcurrency + 1") || m+1 != 11
	}() {
		t.Errorf("CompactorReservedConcurrency's description does not give CompactionMaxConcurrency (%s) + 1 = 11", mc)
	}
	for _, id := range []string{"CompactorFunction", "SweeperFunction"} {
		if rc := jsonOf(obj(fns[id], "Properties", "ReservedConcurrentExecutions")); !strings.Contains(rc, "AWS::NoValue") {
			t.Errorf("%s: reserved concurrency %s, want it only when its parameter is set (Fn::If ... AWS::NoValue)", id, rc)
		}
		found := false
		for _, c := range resourcesOfType(doc, "AWS::Lambda::EventInvokeConfig") {
			if strings.Contains(jsonOf(obj(c, "Properties", "FunctionName")), id) {
				found = obj(c, "Properties", "MaximumEventAgeInSeconds") != nil && jsonOf(obj(c, "Properties", "MaximumRetryAttempts")) == "0"
			}
		}
		if !found {
			t.Errorf("%s: no EventInvokeConfig with MaximumEventAgeInSeconds and no retries", id)
		}
	}
	// SAM resolves the parameter's default here; CloudFormation passes the real value.
	if age := jsonOf(obj(resourcesOfType(doc, "AWS::Lambda::EventInvokeConfig")["CompactorFunctionEventInvokeConfig"], "Properties", "MaximumEventAgeInSeconds")); !regexp.MustCompile(`^\{"Fn::FindInMap":\["CompactorPeriods",.*,"Seconds"\]\}$`).MatchString(age) {
		t.Errorf("compactor maximum event age %s, want one period (CompactorPeriods Seconds)", age)
	}

	// Names: no explicit physical name but log group names, which fit the
	// longest stack name (128 characters) in 512.
	long := strings.Repeat("s", 128)
	for id, r := range doc["Resources"].(map[string]any) {
		for k, v := range obj(r, "Properties").(map[string]any) {
			switch k {
			case "FunctionName", "QueueName", "TableName", "RoleName", "AlarmName", "DashboardName", "BucketName",
				"TopicName", "ManagedPolicyName", "Name", "ScheduleName", "GroupName":
				if typ := obj(r, "Type"); typ == "AWS::Lambda::EventInvokeConfig" || typ == "AWS::Lambda::EventSourceMapping" || typ == "AWS::Lambda::Permission" {
					continue // a reference to a function, not a name
				}
			case "LogGroupName":
			default:
				continue
			}
			switch {
			case k == "LogGroupName":
				name := strings.ReplaceAll(jsonOf(obj(v, "Fn::Sub")), "${AWS::StackName}", long)
				if len(name) > 512 {
					t.Errorf("%s: log group name over 512 characters for a 128-character stack name", id)
				}
			default:
				t.Errorf("%s: explicit %s %v (a generated name fits any stack name)", id, k, jsonOf(v))
			}
		}
	}
}

// TestSAMTemplateAlarmsAndDashboard checks the alarms and the dashboard of
// the transformed template: run-counting alarms follow the schedule period,
// a heartbeat alarm breaches on missing data, sweeper per-table failures
// and queue age are alarmed, custom metrics are scoped to the stack, and
// the dashboard body is valid JSON over metrics the functions emit.
func TestSAMTemplateAlarmsAndDashboard(t *testing.T) {
	doc := samTemplate(t)
	alarms := resourcesOfType(doc, "AWS::CloudWatch::Alarm")
	for id, a := range alarms {
		p := obj(a, "Properties")
		if obj(p, "Namespace") == "tablekeep" {
			if d := jsonOf(obj(p, "Dimensions")); !strings.Contains(d, `{"Name":"Stack","Value":{"Ref":"AWS::StackName"}}`) {
				t.Errorf("%s: custom metric not scoped to the stack: %s", id, d)
			}
			if m, _ := obj(p, "MetricName").(string); !emitted(t, m) {
				t.Errorf("%s: metric %s is emitted by no function", id, m)
			}
		}
		if jsonOf(obj(p, "Period")) == "900" {
			t.Errorf("%s: a 900 s period that only fits the default schedule", id)
		}
	}
	for _, id := range []string{"TableErrorsAlarm", "BacklogAlarm", "NotReachedAlarm", "CompactorErrorsAlarm"} {
		if p := jsonOf(obj(alarms[id], "Properties", "Period")); p != periodMap {
			t.Errorf("%s: period %s, want the compactor period %s", id, p, periodMap)
		}
	}
	hb := obj(alarms["CompactorHeartbeatAlarm"], "Properties")
	if hb == nil || obj(hb, "TreatMissingData") != "breaching" || jsonOf(obj(hb, "EvaluationPeriods")) != "2" ||
		!strings.Contains(jsonOf(obj(hb, "Metrics")), `"Period":`+periodMap) || !strings.Contains(jsonOf(obj(hb, "Metrics")), `"Expression":"runs - failed"`) {
		t.Errorf("heartbeat alarm: %s", jsonOf(hb))
	}
	if p := obj(alarms["SweeperTableErrorsAlarm"], "Properties"); obj(p, "MetricName") != "TableErrors" ||
		!strings.Contains(jsonOf(obj(p, "Dimensions")), `"Value":"sweeper"`) {
		t.Errorf("sweeper per-table failures: %s", jsonOf(p))
	}
	for id, q := range map[string]string{"CleanupQueueAgeAlarm": "CleanupQueue", "CompactionQueueAgeAlarm": "CompactionQueue"} {
		if p := obj(alarms[id], "Properties"); obj(p, "MetricName") != "ApproximateAgeOfOldestMessage" ||
			!strings.Contains(jsonOf(obj(p, "Dimensions")), `"`+q+`"`) {
			t.Errorf("%s (queue age of %s): %s", id, q, jsonOf(p))
		}
	}
	if alarms["ScheduleDeadLetterAlarm"] == nil {
		t.Error("no alarm on the schedule DLQ")
	}

	// The period mapping: seconds, rate and window agree with the key, the
	// window is at most a third of the period, and three periods (the
	// longest evaluation) fit CloudWatch's one-day evaluation range.
	params := obj(doc, "Parameters", "CompactorPeriodMinutes", "AllowedValues").([]any)
	periods := obj(doc, "Mappings", "CompactorPeriods").(map[string]any)
	if len(params) != len(periods) {
		t.Errorf("%d allowed periods, %d mapped", len(params), len(periods))
	}
	for _, v := range params {
		key := v.(string)
		m := periods[key]
		min, _ := strconv.Atoi(key)
		sec, _ := strconv.Atoi(jsonOf(obj(m, "Seconds")))
		win, _ := strconv.Atoi(jsonOf(obj(m, "WindowMinutes")))
		d := time.Duration(min) * time.Minute
		want := fmt.Sprintf("rate(%d minutes)", min)
		if d >= time.Hour {
			want = fmt.Sprintf("rate(%d hour)", min/60)
			if min > 60 {
				want = fmt.Sprintf("rate(%d hours)", min/60)
			}
		}
		if m == nil || sec != min*60 || obj(m, "Rate") != want || win < 1 || 3*win > min || 3*sec > 86400 {
			t.Errorf("CompactorPeriods[%s] = %s (want Seconds %d, Rate %s, window <= a third)", key, jsonOf(m), min*60, want)
		}
	}

	// The dashboard: valid JSON once substituted, over the EMF metrics.
	dash := resourcesOfType(doc, "AWS::CloudWatch::Dashboard")
	if len(dash) != 1 {
		t.Fatalf("dashboards: %d, want 1", len(dash))
	}
	for id, d := range dash {
		sub := obj(d, "Properties", "DashboardBody", "Fn::Sub").([]any)
		body := regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllStringFunc(sub[0].(string), func(v string) string {
			if v == "${Period}" {
				return "900"
			}
			return "x"
		})
		var b struct {
			Widgets []struct {
				Properties struct {
					Title   string
					Metrics [][]any
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("%s: body is not JSON: %v\n%s", id, err, body)
		}
		seen := map[string]bool{}
		for _, w := range b.Widgets {
			for _, m := range w.Properties.Metrics {
				if m[0] == "tablekeep" {
					name := m[1].(string)
					seen[name] = true
					if !emitted(t, name) {
						t.Errorf("%s: widget %q shows %s, which no function emits", id, w.Properties.Title, name)
					}
					if len(m) < 4 || m[2] != "Stack" {
						t.Errorf("%s: %s not scoped to the stack", id, name)
					}
				}
			}
		}
		for _, want := range []string{"UnreclaimedVersions", "ObjectsDeleted", "LockWait", "TableErrors"} {
			if !seen[want] {
				t.Errorf("%s: no widget shows %s", id, want)
			}
		}
	}
}

// emitted reports whether a metric name is recorded by the functions: a
// string literal or telemetry constant in the packages they run.
func emitted(t *testing.T, name string) bool {
	t.Helper()
	root := repoRoot(t)
	for _, dir := range []string{"shared/awsfn", "shared/telemetry", "shared/maintenance"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"`+name+`"`) {
				return true
			}
		}
	}
	return false
}

// TestTemplateParametersMatchConfig: the template's parameter constraints
// accept exactly what the functions accept at cold start (config.go), over
// every whole number of seconds and minutes up to twice the limits, so no
// deployment passes CloudFormation and then fails every invocation.
func TestTemplateParametersMatchConfig(t *testing.T) {
	doc := samTemplate(t)
	param := func(name string) map[string]any { return obj(doc, "Parameters", name).(map[string]any) }
	for _, c := range []struct {
		param, env string
		role       awsfn.Role
		max        time.Duration
	}{
		{"SafetyMargin", awsfn.EnvMargin, awsfn.RoleSweeper, awsfn.MaxMargin},
		{"TableLease", awsfn.EnvLease, awsfn.RoleCompactor, awsfn.MaxLease},
	} {
		re := regexp.MustCompile(`^(?:` + param(c.param)["AllowedPattern"].(string) + `)$`)
		if def := param(c.param)["Default"].(string); !re.MatchString(def) {
			t.Errorf("%s: default %s does not match its own pattern", c.param, def)
		}
		mismatches := 0
		for _, unit := range []string{"s", "m"} {
			for n := 0; n <= int(2*c.max/time.Second); n++ {
				v := strconv.Itoa(n) + unit
				_, err := awsfn.LoadConfig(c.role, func(k string) string {
					switch k {
					case awsfn.EnvWarehouse:
						return "s3://tk-bucket/w"
					case awsfn.EnvLockTable:
						return "locks"
					case awsfn.EnvQueueURL:
						return "https://sqs.us-east-1.amazonaws.com/123456789012/q"
					case c.env:
						return v
					}
					return ""
				})
				if accepts := err == nil; accepts != re.MatchString(v) && mismatches < 5 {
					mismatches++
					t.Errorf("%s=%s: template allows it: %v, the %s accepts it: %v (%v)", c.param, v, re.MatchString(v), c.role, accepts, err)
				}
			}
		}
	}
	// The lease must exceed the compactor timeout: every allowed timeout
	// has a lease the compactor accepts that exceeds it.
	if max, _ := strconv.Atoi(jsonOf(param("CompactorTimeout")["MaxValue"])); time.Duration(max)*time.Second >= awsfn.MaxLease {
		t.Errorf("CompactorTimeout MaxValue %d s leaves no TableLease (at most %s) that exceeds it", max, awsfn.MaxLease)
	}
	if def, _ := strconv.Atoi(jsonOf(param("CompactorTimeout")["Default"])); param("TableLease")["Default"] != "15m" || time.Duration(def)*time.Second >= awsfn.MaxLease {
		t.Errorf("default lease %v does not exceed the default timeout %d s", param("TableLease")["Default"], def)
	}
	// Batch size and concurrency within what SQS event source mappings take.
	if jsonOf(param("CleanerBatchSize")["MaxValue"]) != "10" || jsonOf(param("CleanerMaxConcurrency")["MinValue"]) != "2" {
		t.Errorf("cleaner batch/concurrency bounds: %v %v", param("CleanerBatchSize"), param("CleanerMaxConcurrency"))
	}
}

// TestSAMTemplateBucket: the created bucket removes incomplete multipart
// uploads and is not versioned (tablekeep's deletes reclaim at once); the
// KMS key parameter accepts only a key ARN.
func TestSAMTemplateBucket(t *testing.T) {
	doc := samTemplate(t)
	p := obj(doc, "Resources", "WarehouseBucket", "Properties")
	rules, _ := obj(p, "LifecycleConfiguration", "Rules").([]any)
	found := false
	for _, r := range rules {
		if obj(r, "Status") == "Enabled" && obj(r, "AbortIncompleteMultipartUpload", "DaysAfterInitiation") != nil {
			found = true
		}
	}
	if !found {
		t.Errorf("WarehouseBucket: no enabled AbortIncompleteMultipartUpload rule: %s", jsonOf(obj(p, "LifecycleConfiguration")))
	}
	if v := obj(p, "VersioningConfiguration"); v != nil {
		t.Errorf("WarehouseBucket is versioned (%s): deletes would reclaim nothing", jsonOf(v))
	}
	re := regexp.MustCompile(`^(?:` + obj(doc, "Parameters", "KmsKeyArn", "AllowedPattern").(string) + `)$`)
	for v, ok := range map[string]bool{"": true, "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab": true,
		"alias/aws/s3": false, "arn:aws:kms:eu-west-1:123456789012:alias/tablekeep": false} {
		if re.MatchString(v) != ok {
			t.Errorf("KmsKeyArn %q: allowed %v, want %v", v, !ok, ok)
		}
	}
}
