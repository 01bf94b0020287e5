package provconf

import (
	"fmt"
	"os"
	"strings"
)

// ResolveSecret reads a secret reference, "env:NAME" or "file:PATH" (the
// file's content with surrounding white space trimmed). An unset or empty
// variable and an empty file are errors: a secret is never "".
func ResolveSecret(ref string) (string, error) {
	kind, arg, ok := strings.Cut(strings.TrimSpace(ref), ":")
	if !ok || arg == "" {
		return "", notReference(ref)
	}
	switch kind {
	case "env":
		v, ok := os.LookupEnv(arg)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", arg)
		}
		return v, nil
	case "file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		if v := strings.TrimSpace(string(b)); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("secret file %s is empty", arg)
	}
	return "", notReference(ref)
}

// notReference is the error for ref, which is no secret reference. It
// never quotes ref: what was written there is most likely the secret
// itself.
func notReference(ref string) error {
	return fmt.Errorf("want a secret reference env:NAME or file:PATH, got a value of %d characters that is none "+
		"(the secret itself belongs in the environment or a file, not in the config)", len(strings.TrimSpace(ref)))
}
