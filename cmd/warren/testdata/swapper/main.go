// Command swapper stands in for an attacker inside a jail: it exchanges
// each pair of paths given as arguments (a, b, c, d, ...: a with b, c with
// d) with renameat2(RENAME_EXCHANGE), as fast as it can, until killed.
// The e2e tests copy it into a workspace and start it in the jail.
package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || len(args)%2 != 0 {
		fmt.Fprintln(os.Stderr, "usage: swapper A B [C D ...]")
		os.Exit(2)
	}
	for {
		for i := 0; i < len(args); i += 2 {
			if err := unix.Renameat2(unix.AT_FDCWD, args[i], unix.AT_FDCWD, args[i+1], unix.RENAME_EXCHANGE); err != nil {
				fmt.Fprintln(os.Stderr, "swapper:", err)
				os.Exit(1)
			}
		}
	}
}
