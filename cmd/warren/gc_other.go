//go:build !linux

package main

// releaseImagePages is Linux's (gc_linux.go); elsewhere the pages stay.
func releaseImagePages() {}
