// Command oidctest runs the in-memory test OpenID Provider (package testop)
// on loopback, to try the Hub's identity-provider sign-in without one of
// your own: it prints the issuer, the Hub's settings, the principals and
// how to get their tokens. See the README, "Sign in with your identity
// provider". For trying things out only: never link it into a product.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flowplane/flowplane/internal/idp/testop"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9998", "loopback address to listen on")
	audience := flag.String("audience", "flowplane-hub", "aud of every token (the Hub's SVC_HUB_OIDC_AUDIENCE)")
	flag.Parse()
	principals := []testop.Principal{
		{Name: "alice", Roles: []string{"admin"}},
		{Name: "victor", Roles: []string{"viewer"}},
		{Name: "oscar", Roles: []string{"operator"}, Scopes: []string{"node:edge-1"}},
	}
	for i := range principals {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			fmt.Fprintln(os.Stderr, "oidctest:", err)
			os.Exit(1)
		}
		principals[i].Secret = hex.EncodeToString(b)
	}
	op, err := testop.Start(testop.Options{Addr: *addr, Audience: *audience, Principals: principals})
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidctest:", err)
		os.Exit(1)
	}
	defer op.Close()
	fmt.Printf("test OpenID Provider at %s (discovery: %s/.well-known/openid-configuration)\n\n", op.Issuer, op.Issuer)
	fmt.Printf("Start the Hub with:\n  export SVC_HUB_OIDC_ISSUER=%s SVC_HUB_OIDC_AUDIENCE=%s\n\n", op.Issuer, *audience)
	fmt.Println("Principals (client-credentials grant; tokens live 5 minutes):")
	for _, p := range principals {
		fmt.Printf("  %-7s roles=%v scopes=%v\n", p.Name, p.Roles, p.Scopes)
		fmt.Printf("          TOKEN=$(curl -s -d grant_type=client_credentials -d client_id=%s -d client_secret=%s -d scope=openid %s/oauth/token | jq -r .access_token)\n",
			p.Name, p.Secret, op.Issuer)
	}
	fmt.Println("\nThen: curl -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:8090/api/v1/auth/whoami")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
