package metering

import (
	"strings"
	"testing"
)

// Fixtures are assembled from pieces so that secret scanners do not flag the repository; the
// values are fake.
var (
	fakeOpenAI    = "sk-proj-" + "Zq3vT8kLm2Xw9RbN4yHc7Pf1Gd6Js0Ua5Ee-Kt_Wx2Vb8Qn"
	fakeAnthropic = "sk-ant-api03-" + "h7Gk2Lp9Qw4Rt6Yx1Zc8Vb3Nm5As0Df-Jk7Lq2Wp9Ex4Rt6Yu1IoPa3Sd5Fg8HjKlQ-AbCdEfAA"
	fakeGitHub    = "ghp_" + "R4nd0mL00k1ngT0k3nV4lu3F0rT3st1ngAbCd"
	fakeGitHubPAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
	fakeAWSID     = "AKIA" + "IOSFODNN7EXAMPLE"
	fakeAWSSecret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
	fakeSlack     = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	fakeGoogle    = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	fakeWarren    = "wrn_" + "Xq2-vT8kLm2Xw9RbN4yHc7Pf1Gd6Js0Ua5Ee_Kt7Wx2V"
	fakeAccess    = "wat_" + "Pq7-vT8kLm2Xw9RbN4yHc7Pf1Gd6Js0Ua5Ee_Kt7Wx2V"
	fakeRefresh   = "wrt_" + "Rr3-vT8kLm2Xw9RbN4yHc7Pf1Gd6Js0Ua5Ee_Kt7Wx2V"
	fakeJWT       = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	fakePEM       = "-----BEGIN OPENSSH PRIVATE KEY-----\n" +
		"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n" +
		"QyNTUxOQAAACDx3s9l1vYkJ2Hk0kqg6ZfJ+gh7bX8PqW0r2H1wVjYtZgAAAJgq0s5SKtLO\n" +
		"-----END OPENSSH PRIVATE KEY-----"
	fakeRSA = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7V1w+u8ZkXq\nAbCdEf==\n-----END RSA PRIVATE KEY-----"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in string
		secrets  []string // must be gone
		keep     []string // must stay
	}{
		{"openai key in env", "export OPENAI_API_KEY=" + fakeOpenAI + "\necho ok", []string{fakeOpenAI, "Zq3vT8"}, []string{"export OPENAI_API_KEY=", "echo ok"}},
		{"anthropic key in prose", "use " + fakeAnthropic + " for the call", []string{fakeAnthropic, "h7Gk2Lp9"}, []string{"use ", " for the call"}},
		{"bearer header", "curl -H 'Authorization: Bearer " + fakeGitHub + "' https://api.github.com", []string{fakeGitHub}, []string{"Authorization: Bearer " + Redacted, "https://api.github.com"}},
		{"opaque bearer", `Authorization: Bearer abc.DEF-123_xyz~9`, []string{"abc.DEF-123_xyz~9"}, []string{"Bearer"}},
		{"github token in remote", "git remote add origin https://" + fakeGitHub + "@github.com/acme/app.git", []string{fakeGitHub}, []string{"github.com/acme/app.git"}},
		{"warren token printed", "created:\n" + fakeWarren + "\nsaved", []string{fakeWarren, "Xq2-vT8k"}, []string{"created:\n", "saved"}},
		{"warren token in prose", "use " + fakeWarren + " now", []string{fakeWarren}, []string{"use ", " now"}},
		{"warren OAuth access token", "export T=" + fakeAccess + ";", []string{fakeAccess}, []string{"export T="}},
		{"warren OAuth refresh token", "saved " + fakeRefresh + " to disk", []string{fakeRefresh}, []string{"saved ", " to disk"}},
		{"github fine-grained", "GH_TOKEN " + fakeGitHubPAT, []string{fakeGitHubPAT}, []string{"GH_TOKEN"}},
		{"aws credentials file", "[default]\naws_access_key_id = " + fakeAWSID + "\naws_secret_access_key = " + fakeAWSSecret + "\nregion = eu-west-1",
			[]string{fakeAWSID, fakeAWSSecret, "bPxRfiCY"}, []string{"[default]", "region = eu-west-1"}},
		{"aws id alone", "key " + fakeAWSID + " leaked", []string{fakeAWSID}, []string{"key ", " leaked"}},
		{"pem block", "here:\n" + fakePEM + "\ndone", []string{"b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "QyNTUxOQ", "PRIVATE KEY"}, []string{"here:\n", "\ndone"}},
		{"rsa pem", fakeRSA, []string{"MIIEpAIBAAKCAQEA"}, nil},
		{"password pairs", `db password=hunter2 user=app; DB_PASSWORD: "c0rrect horse"; {"client_secret": "s3cr3t-v4lue"}`,
			[]string{"hunter2", "c0rrect horse", "s3cr3t-v4lue"}, []string{"password=" + Redacted, "user=app", "DB_PASSWORD: " + Redacted, `"client_secret": ` + Redacted}},
		{"url credentials", "DATABASE_URL=postgres://app:Pa55w0rd!@db.internal:5432/prod", []string{"Pa55w0rd!"}, []string{"postgres://app:" + Redacted + "@db.internal:5432/prod"}},
		{"slack", "SLACK " + fakeSlack, []string{fakeSlack}, nil},
		{"google", "key=" + fakeGoogle, []string{fakeGoogle}, nil},
		{"jwt", "cookie: session " + fakeJWT, []string{fakeJWT, "dozjgNry"}, nil},
		{"harmless numbers stay", "max_tokens: 4096, input_tokens=12 token_count: 7", nil, []string{"max_tokens: 4096", "input_tokens=12", "token_count: 7"}},
		{"plain text untouched", "The sky is blue; run go test ./... and skip-tests.", nil, []string{"The sky is blue; run go test ./... and skip-tests."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.in)
			for _, s := range tt.secrets {
				if strings.Contains(got, s) {
					t.Errorf("secret %q survives in %q", s, got)
				}
			}
			for _, s := range tt.keep {
				if !strings.Contains(got, s) {
					t.Errorf("%q lost from %q", s, got)
				}
			}
			if len(tt.secrets) > 0 && !strings.Contains(got, Redacted) {
				t.Errorf("no %s marker in %q", Redacted, got)
			}
			if again := Redact(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}
