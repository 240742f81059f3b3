package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
)

// commands are the words the command line takes before its flags.
var commands = []string{"ctl", "hub", "schema", "test", "version"}

// usageError says what is wrong with a command line and, for a name that
// is a likely typo of a flag of fs or of a command, which one was meant.
// Go's flag package reports an unknown flag as "flag provided but not
// defined: -confg"; that is the case that gets a suggestion.
func usageError(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err.Error()
	}
	var known []string
	fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
	msg := fmt.Sprintf("unknown flag --%s", name)
	if s := component.Suggest(name, known); s != "" {
		msg += fmt.Sprintf("; did you mean --%s?", s)
	}
	return msg
}

// unexpectedArgument names an argument no flag took, with the command it
// may be a typo of.
func unexpectedArgument(arg string) string {
	msg := fmt.Sprintf("unexpected argument %q", arg)
	if s := component.Suggest(arg, commands); s != "" {
		msg += fmt.Sprintf("; did you mean the command %q?", s)
	}
	return msg
}
