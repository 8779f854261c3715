"""Placeholder: replaced by the limiter implementation."""
