package dataplane

import (
	"context"
	"errors"
)

// The implementation is being written; these stubs keep the contract
// compiling.

var errTodo = errors.New("dataplane: not implemented yet")

type server struct{}

func listen(Options) (*Server, error)                                 { return nil, errTodo }
func (*server) addr() string                                          { return "" }
func (*server) close() error                                          { return nil }
func (*server) join(string, []byte, map[string]string) (*Mesh, error) { return nil, errTodo }
func (*server) status() Status                                        { return Status{} }

type mesh struct{}

func (*mesh) send(context.Context, string, string, string) (*Sender, error) { return nil, errTodo }
func (*mesh) receive(string, string, string) (*Receiver, error)             { return nil, errTodo }
func (*mesh) up(string) bool                                                { return false }
func (*mesh) close() error                                                  { return nil }

type sender struct{}

func (*sender) sendFrame(context.Context, Frame) error { return errTodo }
func (*sender) close() error                           { return nil }

type receiver struct{}

func (*receiver) recv(context.Context) (Frame, error) { return Frame{}, errTodo }
func (*receiver) close() error                        { return nil }
