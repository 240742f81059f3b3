// Command oidctest runs the in-memory test OpenID Provider (package testop)
// on loopback, to try the Hub's identity-provider sign-in without one of
// your own: it prints the issuer, the Hub's settings, the principals (users
// of its login page for the console's sign-in, and clients of the
// client-credentials grant) and how to get their tokens. See the README, "Sign in with your identity
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
	"strings"
	"syscall"

	"github.com/flowplane/flowplane/internal/idp/testop"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9998", "loopback address to listen on")
	audience := flag.String("audience", "flowplane-hub", "aud of every token (the Hub's SVC_HUB_OIDC_AUDIENCE), and the console's client id")
	redirect := flag.String("redirect", "http://127.0.0.1:8090/ui/auth/callback", "the console's callback (a loopback http one matches any port)")
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
		// Each is a user of the login page too, its password its name's.
		principals[i].Password = principals[i].Name + "-password"
	}
	op, err := testop.Start(testop.Options{Addr: *addr, Audience: *audience, Principals: principals, RedirectURIs: append([]string{*redirect}, testop.DefaultRedirectURIs...)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidctest:", err)
		os.Exit(1)
	}
	defer op.Close()
	fmt.Printf("test OpenID Provider at %s (discovery: %s/.well-known/openid-configuration)\n\n", op.Issuer, op.Issuer)
	fmt.Printf("Start the Hub with:\n  export SVC_HUB_OIDC_ISSUER=%s SVC_HUB_OIDC_AUDIENCE=%s SVC_HUB_OIDC_CLIENT_ID=%s\n\n", op.Issuer, *audience, *audience)
	fmt.Printf("Console: open http://127.0.0.1:8090/ui/, choose \"Sign in with %s\" and log in on this provider's page\n", strings.TrimPrefix(op.Issuer, "http://"))
	fmt.Printf("as one of the users below (a public client %q with PKCE, redirect URI %s).\n\n", *audience, *redirect)
	fmt.Println("Principals (users of the login page, and clients of the client-credentials grant; tokens live 5 minutes):")
	for _, p := range principals {
		fmt.Printf("  %-7s password=%s roles=%v scopes=%v\n", p.Name, p.Password, p.Roles, p.Scopes)
		fmt.Printf("          TOKEN=$(curl -s -d grant_type=client_credentials -d client_id=%s -d client_secret=%s -d scope=openid %s/oauth/token | jq -r .access_token)\n",
			p.Name, p.Secret, op.Issuer)
	}
	fmt.Println("\nThen: curl -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:8090/api/v1/auth/whoami")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
