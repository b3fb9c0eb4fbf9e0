package main

//go:generate go run . config docs -o ../../docs/configuration.md
