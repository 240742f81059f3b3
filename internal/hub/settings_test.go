package hub

import (
	"errors"
	"strings"
	"testing"
)

func TestSettingsFromEnv(t *testing.T) {
	full := map[string]string{EnvStorage: "/var/lib/hub.db", EnvOperatorToken: "op-secret-0123456789", EnvNodeToken: "node-secret-0123456789"}
	with := func(extra map[string]string, base map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name         string
		env          map[string]string
		flagAddr     string
		wantErr      string // substring; "" = no error
		wantWarnings int
		wantAddr     string
	}{
		{"secure defaults", full, "", "", 0, DefaultAddress},
		{"secure beyond loopback", with(map[string]string{EnvAddress: "0.0.0.0:8090"}, full), "", "", 0, "0.0.0.0:8090"},
		{"flag overrides address", full, "127.0.0.1:9999", "", 0, "127.0.0.1:9999"},
		{"nothing set", map[string]string{}, "", "set SVC_HUB_STORAGE (durable SQLite path or postgres:// URL), SVC_OPERATOR_TOKEN (operator API token), SVC_NODE_TOKEN (Agent registration token)", 0, ""},
		{"token missing on loopback too", map[string]string{EnvStorage: "x.db", EnvNodeToken: "node-secret-0123456789"}, "", "set SVC_OPERATOR_TOKEN", 0, ""},
		{"insecure local, nothing else", map[string]string{EnvInsecureLocal: "1"}, "", "", 3, DefaultAddress},
		{"insecure local with storage", map[string]string{EnvInsecureLocal: "1", EnvStorage: "x.db"}, "", "", 2, DefaultAddress},
		{"insecure local refuses non-loopback", map[string]string{EnvInsecureLocal: "1", EnvAddress: "0.0.0.0:8090"}, "", "accepts only a loopback SVC_HUB_ADDRESS", 0, ""},
		{"insecure local refuses non-loopback flag", map[string]string{EnvInsecureLocal: "1"}, "10.1.2.3:80", "accepts only a loopback", 0, ""},
		{"insecure local ipv6 loopback", map[string]string{EnvInsecureLocal: "1", EnvAddress: "[::1]:8090"}, "", "", 3, "[::1]:8090"},
		{"bad insecure value", map[string]string{EnvInsecureLocal: "yes"}, "", `must be 1 or unset, got "yes"`, 0, ""},
		{"bad address", with(map[string]string{EnvAddress: "nohost"}, full), "", `"nohost" is not host:port`, 0, ""},
		{"api prefix is the console's", with(map[string]string{EnvAPIPrefix: "/ui"}, full), "", "must not be under /ui/", 0, ""},
		{"api prefix under the console", with(map[string]string{EnvAPIPrefix: "/ui/api"}, full), "", "must not be under /ui/", 0, ""},
		{"api prefix beside the console", with(map[string]string{EnvAPIPrefix: "/uix"}, full), "", "", 0, DefaultAddress},
		{"short operator token", with(map[string]string{EnvOperatorToken: "op-secret"}, full), "", "SVC_OPERATOR_TOKEN must be at least 16 characters", 0, ""},
		{"one-character node token", with(map[string]string{EnvNodeToken: "n"}, full), "", "SVC_NODE_TOKEN must be at least 16 characters", 0, ""},
		{"short token in insecure local too", map[string]string{EnvInsecureLocal: "1", EnvOperatorToken: "x"}, "", "SVC_OPERATOR_TOKEN must be at least 16 characters", 0, ""},
		{"16 characters are enough", with(map[string]string{EnvOperatorToken: "0123456789abcdef"}, full), "", "", 0, DefaultAddress},
		{"operator token equal to node token", with(map[string]string{EnvOperatorToken: "node-secret-0123456789"}, full), "", "SVC_OPERATOR_TOKEN and SVC_NODE_TOKEN must differ", 0, ""},
		{"tls cert without key", with(map[string]string{EnvTLSCert: "/etc/hub/cert.pem"}, full), "", "SVC_HUB_TLS_CERT and SVC_HUB_TLS_KEY go together", 0, ""},
		{"tls key without cert", with(map[string]string{EnvTLSKey: "/etc/hub/key.pem"}, full), "", "SVC_HUB_TLS_CERT and SVC_HUB_TLS_KEY go together", 0, ""},
		{"cors origins", with(map[string]string{EnvCORSOrigins: "https://console.example:8443, http://localhost:3000"}, full), "", "", 0, DefaultAddress},
		{"cors origin with a path", with(map[string]string{EnvCORSOrigins: "https://console.example/ui"}, full), "", `SVC_HUB_CORS_ORIGINS: "https://console.example/ui" is not an origin`, 0, ""},
		{"cors origin without a scheme", with(map[string]string{EnvCORSOrigins: "console.example"}, full), "", `"console.example" is not an origin`, 0, ""},
		{"tls pair", with(map[string]string{EnvTLSCert: "/etc/hub/cert.pem", EnvTLSKey: "/etc/hub/key.pem"}, full), "", "", 0, DefaultAddress},
		{"client ca without tls", with(map[string]string{EnvClientCA: "/etc/hub/nodes-ca.pem"}, full), "", "SVC_HUB_CLIENT_CA needs SVC_HUB_TLS_CERT", 0, ""},
		{"client ca with tls", with(map[string]string{EnvClientCA: "/etc/hub/nodes-ca.pem", EnvTLSCert: "/etc/hub/cert.pem", EnvTLSKey: "/etc/hub/key.pem"}, full), "", "", 0, DefaultAddress},
		{"session ttl max", with(map[string]string{EnvSessionTTLMax: "15m"}, full), "", "", 0, DefaultAddress},
		{"session ttl max too short", with(map[string]string{EnvSessionTTLMax: "500ms"}, full), "", "SVC_HUB_SESSION_TTL_MAX must be a duration of at least 1s", 0, ""},
		{"node gc off", with(map[string]string{EnvNodeGCAfter: "0"}, full), "", "", 0, DefaultAddress},
		{"oidc", with(map[string]string{EnvOIDCIssuer: "https://idp.example/realms/ops", EnvOIDCAudience: "flowplane"}, full), "", "", 0, DefaultAddress},
		{"oidc on loopback http", with(map[string]string{EnvOIDCIssuer: "http://127.0.0.1:9998", EnvOIDCAudience: "flowplane"}, full), "", "", 0, DefaultAddress},
		{"oidc issuer without audience", with(map[string]string{EnvOIDCIssuer: "https://idp.example"}, full), "", "SVC_HUB_OIDC_ISSUER and SVC_HUB_OIDC_AUDIENCE go together", 0, ""},
		{"oidc audience without issuer", with(map[string]string{EnvOIDCAudience: "flowplane"}, full), "", "go together", 0, ""},
		{"oidc over plain http", with(map[string]string{EnvOIDCIssuer: "http://idp.example", EnvOIDCAudience: "flowplane"}, full), "", "must be an https URL", 0, ""},
		{"console sign-in", with(map[string]string{EnvOIDCIssuer: "https://idp.example", EnvOIDCAudience: "flowplane", EnvOIDCClientID: "flowplane",
			EnvOIDCRedirectURL: "https://hub.example/ui/auth/callback"}, full), "", "", 0, DefaultAddress},
		{"client id without issuer", with(map[string]string{EnvOIDCClientID: "flowplane"}, full), "", "SVC_HUB_OIDC_CLIENT_ID needs SVC_HUB_OIDC_ISSUER", 0, ""},
		{"client secret without client id", with(map[string]string{EnvOIDCIssuer: "https://idp.example", EnvOIDCAudience: "flowplane", EnvOIDCClientSecret: "x"}, full), "", "need SVC_HUB_OIDC_CLIENT_ID", 0, ""},
		{"redirect URL over plain http", with(map[string]string{EnvOIDCIssuer: "https://idp.example", EnvOIDCAudience: "flowplane", EnvOIDCClientID: "flowplane",
			EnvOIDCRedirectURL: "http://hub.example/ui/auth/callback"}, full), "", "must be the console's callback", 0, ""},
		{"redirect URL elsewhere", with(map[string]string{EnvOIDCIssuer: "https://idp.example", EnvOIDCAudience: "flowplane", EnvOIDCClientID: "flowplane",
			EnvOIDCRedirectURL: "https://hub.example/callback"}, full), "", "must be the console's callback", 0, ""},
		{"insecure local with a tokens file is not open", map[string]string{EnvInsecureLocal: "1", EnvTokensFile: "/etc/hub/tokens"}, "", "", 2, DefaultAddress},
		{"node gc negative", with(map[string]string{EnvNodeGCAfter: "-1h"}, full), "", "SVC_HUB_NODE_GC_AFTER must be a duration", 0, ""},
		{"lease ttl", with(map[string]string{EnvLeaseTTL: "10s"}, full), "", "", 0, DefaultAddress},
		{"lease ttl too short", with(map[string]string{EnvLeaseTTL: "2s"}, full), "", "SVC_HUB_LEASE_TTL must be a duration from 3s to 5m", 0, ""},
		{"lease ttl too long", with(map[string]string{EnvLeaseTTL: "1h"}, full), "", "SVC_HUB_LEASE_TTL must be a duration", 0, ""},
		{"lease ttl not a duration", with(map[string]string{EnvLeaseTTL: "5"}, full), "", "SVC_HUB_LEASE_TTL must be a duration", 0, ""},
		{"advertise url", with(map[string]string{EnvAdvertiseURL: "https://hub-1.example:8090/"}, full), "", "", 0, DefaultAddress},
		{"advertise url without scheme", with(map[string]string{EnvAdvertiseURL: "hub-1.example:8090"}, full), "", "SVC_HUB_ADVERTISE_URL must be an http:// or https:// URL", 0, ""},
		{"advertise url with credentials", with(map[string]string{EnvAdvertiseURL: "https://u:p@hub-1.example"}, full), "", "SVC_HUB_ADVERTISE_URL must be", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, warnings, err := SettingsFromEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }, tt.flagAddr, "")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInsecure) {
					t.Fatalf("err = %v, want ErrInsecure containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tt.wantWarnings || s.Address != tt.wantAddr {
				t.Errorf("address %q warnings %v; want %q and %d warnings", s.Address, warnings, tt.wantAddr, tt.wantWarnings)
			}
			for _, w := range append(warnings, errString(err)) {
				for _, secret := range []string{"op-secret", "node-secret", "0123456789abcdef"} {
					if strings.Contains(w, secret) {
						t.Errorf("message leaks a token: %s", w)
					}
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
