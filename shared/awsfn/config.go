package awsfn

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// Environment variables read by LoadConfig.
const (
	EnvWarehouse    = warehouse.EnvWarehouse        // s3://bucket/prefix (all functions)
	EnvLockTable    = warehouse.EnvLockTable        // DynamoDB lock table (compactor)
	EnvQueueURL     = "TABLEKEEP_QUEUE_URL"         // cleanup queue URL (compactor, cleaner)
	EnvMargin       = "TABLEKEEP_SAFETY_MARGIN"     // time kept before the Lambda deadline (default 30s)
	EnvLease        = warehouse.EnvLease            // table lock lease (default 5m)
	EnvLockWait     = warehouse.EnvLockWait         // wait for a busy table lock (default 5s)
	EnvSweepDeletes = "TABLEKEEP_SWEEP_MAX_DELETES" // deletes per table per sweep invocation (default 10000)
	EnvLogLevel     = "TABLEKEEP_LOG_LEVEL"         // debug, info (default), warn, error
	EnvStack        = "TABLEKEEP_STACK"             // CloudFormation stack: the metrics' Stack dimension (optional)

	// LOCAL ONLY (sam local invoke --env-vars): the template declares them
	// empty, so an env file can set them; all four or none.
	EnvLocalS3Endpoint  = "TABLEKEEP_LOCAL_S3_ENDPOINT"       // versitygw of the local stack
	EnvLocalAWSEndpoint = "TABLEKEEP_LOCAL_AWS_ENDPOINT"      // moto_server (DynamoDB, SQS)
	EnvLocalAccessKey   = "TABLEKEEP_LOCAL_ACCESS_KEY_ID"     // the role's versitygw account
	EnvLocalSecretKey   = "TABLEKEEP_LOCAL_SECRET_ACCESS_KEY" // its secret
	EnvSAMLocal         = "AWS_SAM_LOCAL"                     // set to "true" by sam local
	EnvClockOffset      = "TABLEKEEP_CLOCK_OFFSET"            // TEST ONLY: shifts the clock, e.g. "2h"
	EnvAllowOffset      = "TABLEKEEP_ALLOW_CLOCK_OFFSET"      // must be "test" for EnvClockOffset to be accepted
)

// Limits of what LoadConfig accepts. template.yaml's parameter constraints
// equal them (TestTemplateParametersMatchConfig).
const (
	MinMargin          = time.Second
	MaxMargin          = 5 * time.Minute
	MinLease           = warehouse.MinLease
	MaxLease           = warehouse.MaxLease
	MaxLockWait        = warehouse.MaxLockWait
	MaxSweepDeletes    = 1_000_000
	DefaultMargin      = 30 * time.Second
	DefaultLease       = warehouse.DefaultLease
	DefaultLockWait    = warehouse.DefaultLockWait
	DefaultSweepDelete = 10000
)

// stackRE is a CloudFormation stack name.
var stackRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,127}$`)

// Role is which function a configuration is for; it decides what is required.
type Role string

// The three functions.
const (
	RoleCompactor Role = "compactor"
	RoleCleaner   Role = "cleaner"
	RoleSweeper   Role = "sweeper"
)

// Config is one function's configuration.
type Config struct {
	Role      Role
	Warehouse string // s3://bucket/prefix
	Bucket    string
	Prefix    string
	LockTable string
	QueueURL  string
	Margin    time.Duration
	Lease     time.Duration
	LockWait  time.Duration
	// SweepMaxDeletes bounds the sweeper's deletes per table per invocation.
	SweepMaxDeletes int
	LogLevel        string
	// Stack is the CloudFormation stack (EnvStack): metrics carry it as a
	// dimension so two stacks in one account never share alarms.
	Stack string
	// ClockOffset is FOR TESTS ONLY: every time decision (grace windows,
	// leases, retention) is made as if the clock read now+ClockOffset, so an
	// end-to-end test can act as if the grace window had passed without
	// sleeping. It is refused unless TABLEKEEP_ALLOW_CLOCK_OFFSET=test, and
	// must never be set in a deployment.
	ClockOffset time.Duration
	// CrashAfter is FOR TESTS ONLY (EnvCrashAfter): exit mid-invocation.
	CrashAfter *CrashPoint
	// Local is set only by a local env file (sam local invoke): every
	// client talks to the local stack with the role's local keys, never to
	// AWS (Main applies it to the SDK's variables before building clients).
	Local *LocalStack
	// Fan-out (compactor): see fanout_config.go.
	CompactionQueueURL string
	InlineTables       int           // -1: no limit
	InlineTime         time.Duration // 0: until the deadline
	SafetyScanEvery    time.Duration // 0: every pass lists every table
}

// LocalStack is where a function run by sam local invoke talks to.
type LocalStack struct {
	S3Endpoint, AWSEndpoint string
	AccessKey, SecretKey    string
}

// Environ is the SDK's standard variables for l: endpoints and static
// credentials, with any session token and profile cleared.
func (l *LocalStack) Environ() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_S3": l.S3Endpoint, "AWS_ENDPOINT_URL_DYNAMODB": l.AWSEndpoint, "AWS_ENDPOINT_URL_SQS": l.AWSEndpoint,
		"AWS_ENDPOINT_URL": "", "AWS_ACCESS_KEY_ID": l.AccessKey, "AWS_SECRET_ACCESS_KEY": l.SecretKey,
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	}
}

// localHosts are the hosts a local endpoint may name: this machine, or the
// Docker host as seen from sam local's container.
var localHosts = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "host.docker.internal": true}

// ErrConfig marks configuration errors.
var ErrConfig = errors.New("tablekeep lambda configuration")

// LoadConfig reads and validates the configuration of role from getenv
// (os.Getenv in the functions). Every problem is reported at once, each
// naming its variable and what it wants.
func LoadConfig(role Role, getenv func(string) string) (Config, error) {
	c := Config{Role: role, LogLevel: "info"}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	switch role {
	case RoleCompactor, RoleCleaner, RoleSweeper:
	default:
		return c, fmt.Errorf("%w: unknown role %q", ErrConfig, role)
	}
	c.Warehouse = strings.TrimSpace(getenv(EnvWarehouse))
	if c.Warehouse == "" {
		bad("%s is not set (want s3://bucket/prefix)", EnvWarehouse)
	} else if scheme, bucket, prefix, err := objstore.ParseURI(c.Warehouse); err != nil {
		bad("%s: %v", EnvWarehouse, err)
	} else if scheme != "s3" {
		bad("%s=%q: want an s3://bucket/prefix URI", EnvWarehouse, c.Warehouse)
	} else {
		c.Bucket, c.Prefix = bucket, prefix
	}
	c.LockTable = strings.TrimSpace(getenv(EnvLockTable))
	if role == RoleCompactor && c.LockTable == "" {
		bad("%s is not set (the DynamoDB lock table name)", EnvLockTable)
	}
	c.QueueURL = strings.TrimSpace(getenv(EnvQueueURL))
	if role != RoleSweeper {
		if c.QueueURL == "" {
			bad("%s is not set (the cleanup queue URL)", EnvQueueURL)
		} else if u, err := url.Parse(c.QueueURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("%s=%q is not a queue URL (want https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)", EnvQueueURL, c.QueueURL)
		}
	}
	dur := func(name string, def, lo, hi time.Duration) time.Duration {
		d, err := warehouse.DurationFromEnv(getenv, name, def, lo, hi)
		if err != nil {
			bad("%s", err)
		}
		return d
	}
	c.Margin = dur(EnvMargin, DefaultMargin, MinMargin, MaxMargin)
	c.Lease = dur(EnvLease, DefaultLease, MinLease, MaxLease)
	c.LockWait = dur(EnvLockWait, DefaultLockWait, 0, MaxLockWait)
	c.SweepMaxDeletes = DefaultSweepDelete
	if v := strings.TrimSpace(getenv(EnvSweepDeletes)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxSweepDeletes {
			bad("%s=%q must be an integer between 1 and %d", EnvSweepDeletes, v, MaxSweepDeletes)
		} else {
			c.SweepMaxDeletes = n
		}
	}
	if v := strings.ToLower(strings.TrimSpace(getenv(EnvLogLevel))); v != "" {
		switch v {
		case "debug", "info", "warn", "error":
			c.LogLevel = v
		default:
			bad("%s=%q: want debug, info, warn or error", EnvLogLevel, v)
		}
	}
	if v := strings.TrimSpace(getenv(EnvStack)); v != "" {
		if !stackRE.MatchString(v) {
			bad("%s=%q is not a CloudFormation stack name", EnvStack, v)
		} else {
			c.Stack = v
		}
	}
	local := map[string]string{}
	for _, k := range []string{EnvLocalS3Endpoint, EnvLocalAWSEndpoint, EnvLocalAccessKey, EnvLocalSecretKey} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			local[k] = v
		}
	}
	switch {
	case len(local) == 4:
		for _, k := range []string{EnvLocalS3Endpoint, EnvLocalAWSEndpoint} {
			u, err := url.Parse(local[k])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !localHosts[u.Hostname()] {
				bad("%s=%q must be an http(s) URL on this machine (127.0.0.1, localhost, host.docker.internal): local only", k, local[k])
			}
		}
		c.Local = &LocalStack{S3Endpoint: local[EnvLocalS3Endpoint], AWSEndpoint: local[EnvLocalAWSEndpoint],
			AccessKey: local[EnvLocalAccessKey], SecretKey: local[EnvLocalSecretKey]}
	case len(local) > 0:
		bad("%s, %s, %s and %s go together (local only; make sam-env writes them)", EnvLocalS3Endpoint, EnvLocalAWSEndpoint, EnvLocalAccessKey, EnvLocalSecretKey)
	case getenv(EnvSAMLocal) == "true":
		bad("sam local invoke without the local env file would use your AWS credentials against real AWS: "+
			"pass --env-vars .stack/sam-env.json (make sam-env) to use the local stack (%s unset)", EnvLocalS3Endpoint)
	}
	if v := strings.TrimSpace(getenv(EnvClockOffset)); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case getenv(EnvAllowOffset) != "test":
			bad("%s is for tests only and needs %s=test; unset it in deployments", EnvClockOffset, EnvAllowOffset)
		case err != nil:
			bad("%s=%q is not a duration", EnvClockOffset, v)
		default:
			c.ClockOffset = d
		}
	}
	if v := strings.TrimSpace(getenv(EnvCrashAfter)); v != "" {
		cp, err := ParseCrashPoint(v)
		switch {
		case getenv(EnvAllowOffset) != "test":
			bad("%s is for tests only and needs %s=test; unset it in deployments", EnvCrashAfter, EnvAllowOffset)
		case err != nil:
			bad("%v", err)
		default:
			c.CrashAfter = cp
		}
	}
	loadFanout(&c, getenv, bad)
	if len(errs) > 0 {
		return c, fmt.Errorf("%w (%s): %s", ErrConfig, role, strings.Join(errs, "; "))
	}
	return c, nil
}
