package main

import (
	"os"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestMain removes the wakegate binary the tests built once they are done.
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
