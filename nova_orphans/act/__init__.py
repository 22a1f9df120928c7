"""The one place with side effects on guests: the actuator and its effects."""
