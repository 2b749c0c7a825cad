// Command hello is the program of internal/ociimage's tests: it prints
// its platform and whether it found the CA bundle and the users.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	_, err := os.Stat("/etc/ssl/certs/ca-certificates.crt")
	fmt.Printf("hello %s/%s ca=%v\n", runtime.GOOS, runtime.GOARCH, err == nil)
}
