package idp

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/flowplane/flowplane/internal/access"
)

// Client is a client of the provider's authorization code flow with PKCE
// (the Hub's console sign-in): a public client when Secret is empty.
type Client struct {
	ID, Secret string
	// RedirectURL is where the provider sends the browser back with the
	// code; it must be registered with the provider.
	RedirectURL string
}

// Pending is one sign-in between the redirect to the provider and the
// callback: state ties the callback to the browser that started it, nonce
// the ID token to this sign-in, verifier the code to this client (PKCE).
// It is kept by the Hub, never sent anywhere but in the two requests.
type Pending struct {
	State, Nonce, Verifier string
}

// NewPending makes a sign-in's random state, nonce and PKCE verifier.
func NewPending() Pending {
	return Pending{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
}

// ErrRefused wraps why a callback is not accepted: state or nonce
// mismatch, a code the provider does not exchange, an ID or access token
// that does not verify.
var ErrRefused = errors.New("the sign-in is refused")

func (v *Verifier) oauth(ctx context.Context, c Client) (*oauth2.Config, error) {
	if _, err := v.discover(ctx); err != nil {
		return nil, err
	}
	v.mu.Lock()
	ep := v.endpoint
	v.mu.Unlock()
	// A public client sends its id in the body: no secret to put in a
	// Basic header.
	if c.Secret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: c.RedirectURL, Endpoint: ep,
		Scopes: []string{oidc.ScopeOpenID, "profile"}}, nil
}

// AuthCodeURL is the provider's authorization URL of sign-in p: code flow,
// S256 challenge of p's verifier, p's state and nonce.
func (v *Verifier) AuthCodeURL(ctx context.Context, c Client, p Pending) (string, error) {
	conf, err := v.oauth(ctx, c)
	if err != nil {
		return "", err
	}
	return conf.AuthCodeURL(p.State, oauth2.S256ChallengeOption(p.Verifier), oidc.Nonce(p.Nonce)), nil
}

// Redeem finishes sign-in p at its callback: it checks state, exchanges
// code with p's verifier, verifies the ID token (signature, iss, aud of
// the client, exp, and p's nonce; at_hash when present) and returns the
// principal of the access token, verified like any bearer JWT. Errors are
// ErrRefused or ErrUnavailable; none holds a token.
func (v *Verifier) Redeem(ctx context.Context, c Client, p Pending, state, code string) (access.Principal, error) {
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(p.State)) != 1 {
		return access.Principal{}, fmt.Errorf("%w: the state does not match this browser's sign-in", ErrRefused)
	}
	if code == "" {
		return access.Principal{}, fmt.Errorf("%w: the callback has no code", ErrRefused)
	}
	conf, err := v.oauth(ctx, c)
	if err != nil {
		return access.Principal{}, err
	}
	ctx = oidc.ClientContext(ctx, v.cfg.Client)
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return access.Principal{}, fmt.Errorf("%w: the provider did not exchange the code: %s", ErrRefused, oauthReason(re))
		}
		return access.Principal{}, fmt.Errorf("%w: the token endpoint: %v", ErrUnavailable, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return access.Principal{}, fmt.Errorf("%w: the provider sent no ID token", ErrRefused)
	}
	idt, err := oidc.NewVerifier(v.cfg.Issuer, v.keySet(), &oidc.Config{
		ClientID: c.ID, SupportedSigningAlgs: Algorithms, Now: v.cfg.Now,
	}).Verify(ctx, raw)
	if err != nil {
		return access.Principal{}, fmt.Errorf("%w: the ID token is not valid: %v", ErrRefused, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.Nonce)) != 1 {
		return access.Principal{}, fmt.Errorf("%w: the ID token's nonce does not match this sign-in", ErrRefused)
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return access.Principal{}, fmt.Errorf("%w: the access token does not match the ID token's at_hash", ErrRefused)
		}
	}
	pr, err := v.Principal(ctx, tok.AccessToken)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			return access.Principal{}, err
		}
		return access.Principal{}, fmt.Errorf("%w: the access token: %v", ErrRefused, err)
	}
	return pr, nil
}

func (v *Verifier) keySet() *oidc.RemoteKeySet {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys
}

// oauthReason is the provider's error code and description, bounded.
func oauthReason(re *oauth2.RetrieveError) string {
	s := re.ErrorCode
	if re.ErrorDescription != "" {
		s += ": " + re.ErrorDescription
	}
	if s == "" {
		s = fmt.Sprintf("HTTP %d", re.Response.StatusCode)
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
