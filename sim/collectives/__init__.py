"""Collectives as flows: all-to-all, rings, trees and point-to-point sends."""
