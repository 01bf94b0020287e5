// Package homesdir says where a root gateway keeps the folders of its
// exec homes when its data_dir lies under a folder other users cannot
// pass: one folder per data_dir under a machine-wide folder that the
// gateway controls from the root down. The exec provider lays the folders
// out there; tests that clean up after a gateway find its homes there.
package homesdir

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// DefaultMachineDir is the machine-wide folder of root gateways: the uid
// registry every gateway of the machine shares, the home folders of
// gateways whose data_dir is closed to other users, and the copies of
// {self} their homes run.
const DefaultMachineDir = "/var/lib/wakegate"

// Of is the folder under machineDir that holds the home folders of the
// gateway whose (absolute, clean) data_dir is dataDir:
// machineDir/homes/<the first 16 hex digits of the SHA-256 of dataDir>.
func Of(machineDir, dataDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dataDir)))
	return filepath.Join(machineDir, "homes", hex.EncodeToString(sum[:8]))
}
