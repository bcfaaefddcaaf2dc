package awsfn

import (
	"errors"
	"strings"
	"testing"
)

// TestLoadConfigLocal: the local-only variables (sam local invoke's env
// file) come all four together and name only this machine; under sam local
// without them the function refuses to run rather than use the developer's
// AWS credentials against real AWS.
func TestLoadConfigLocal(t *testing.T) {
	base := map[string]string{EnvWarehouse: "s3://tk-bucket/warehouse"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	local := []string{EnvLocalS3Endpoint, "http://127.0.0.1:7070", EnvLocalAWSEndpoint, "http://host.docker.internal:5000",
		EnvLocalAccessKey, "tablekeep-sweeper", EnvLocalSecretKey, "s"}
	c, err := LoadConfig(RoleSweeper, env(with(append(local, EnvSAMLocal, "true")...)))
	if err != nil || c.Local == nil || c.Local.Environ()["AWS_ENDPOINT_URL_S3"] != "http://127.0.0.1:7070" ||
		c.Local.Environ()["AWS_ACCESS_KEY_ID"] != "tablekeep-sweeper" || c.Local.Environ()["AWS_SESSION_TOKEN"] != "" {
		t.Fatalf("local config: %+v, %v", c.Local, err)
	}
	if c, err := LoadConfig(RoleSweeper, env(base)); err != nil || c.Local != nil {
		t.Errorf("on AWS (nothing set): %+v, %v", c.Local, err)
	}
	for name, m := range map[string]map[string]string{
		"sam local without the env file": with(EnvSAMLocal, "true"),
		"partial":                        with(EnvLocalS3Endpoint, "http://127.0.0.1:7070"),
		"remote endpoint":                with(append(append([]string{}, local...), EnvLocalS3Endpoint, "https://s3.us-east-1.amazonaws.com")...),
	} {
		_, err := LoadConfig(RoleSweeper, env(m))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "TABLEKEEP_LOCAL_S3_ENDPOINT") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
