"""Hardware access shared by the GPIO, serial and I2C tools."""
